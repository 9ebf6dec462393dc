package pki

import (
	"net"
	"path/filepath"
	"testing"
)

func TestCovers(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	issued := CertSpec{CommonName: "xmpp.test", DNSNames: []string{"xmpp.test", "localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, Server: true}
	certFile, _, err := ca.Issue(dir, "server", issued)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		file string
		spec CertSpec
		want bool
	}{
		{"every name", certFile, issued, true},
		{"fewer names", certFile, CertSpec{DNSNames: []string{"xmpp.test"}, IPs: []net.IP{net.ParseIP("10.0.0.1")}}, true},
		{"another IP", certFile, CertSpec{IPs: []net.IP{net.ParseIP("10.96.0.1")}}, false},
		{"another DNS name", certFile, CertSpec{DNSNames: []string{"ejabberd.svc"}}, false},
		{"no file", filepath.Join(dir, "missing.crt"), issued, false},
		{"not a certificate", filepath.Join(dir, "ca.key"), issued, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Covers(tc.file, tc.spec); got != tc.want {
				t.Errorf("Covers(%s) = %v, want %v", filepath.Base(tc.file), got, tc.want)
			}
		})
	}
}
