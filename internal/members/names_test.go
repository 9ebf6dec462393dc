package members

import (
	"strings"
	"testing"
)

func TestDNSLabel(t *testing.T) {
	cases := map[string]string{
		"server-app":            "server-app",
		"Server_App":            "server-app-",
		strings.Repeat("x", 70): strings.Repeat("x", 56) + "-",
	}
	for in, prefix := range cases {
		got := DNSLabel(in)
		if !strings.HasPrefix(got, prefix) || len(got) > 63 {
			t.Errorf("DNSLabel(%q) = %q, want prefix %q and at most 63 chars", in, got, prefix)
		}
	}
	if DNSLabel("Server_App") == DNSLabel("server-app") {
		t.Error("distinct names collide")
	}
}
