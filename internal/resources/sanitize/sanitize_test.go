package sanitize

import (
	"strings"
	"testing"
)

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"NVIDIA H100 80GB":             "NVIDIA-H100-80GB",
		"  zcu102 ":                    "zcu102",
		"--a/b--":                      "a-b",
		"::":                           "",
		strings.Repeat("x", 70) + "-y": strings.Repeat("x", 63),
	} {
		if got := LabelValue(in); got != want {
			t.Errorf("LabelValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUserLabel(t *testing.T) {
	cases := []struct {
		in, name, value string
		ok              bool
	}{
		{"node-type:rpi", "node-type", "rpi", true},
		{"gpu", "gpu", "true", true},
		{"room:4 B", "room", "4-B", true},
		{"::", "", "", false},
		{strings.Repeat("k", 70), strings.Repeat("k", MaxLabelValue-len(userLabelPrefix)), "true", true},
	}
	for _, c := range cases {
		name, value, ok := UserLabel(c.in)
		if name != c.name || value != c.value || ok != c.ok {
			t.Errorf("UserLabel(%q) = %q, %q, %v; want %q, %q, %v", c.in, name, value, ok, c.name, c.value, c.ok)
		}
	}
}
