package kwoklet

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	RunSandboxIfAsked()
	os.Exit(m.Run())
}

// TestSandbox runs a shell in a sandbox: it sees a folder and a file at
// paths the host does not have, as the user asked, read-only, and the
// host is left as it was.
func TestSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (mount namespaces)")
	}
	dir := t.TempDir()
	vol := filepath.Join(dir, "vol")
	if err := os.MkdirAll(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "x"), []byte("from the volume"), 0o644); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret"), 0o444); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/etc/mlsysops-sandbox-test", "/run/secrets/mlsysops-sandbox-test", "/mlsysops-sandbox-test"} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("%s exists on the host before the test", p)
		}
	}
	s := &Sandbox{
		Dir: filepath.Join(dir, "sandbox"),
		Mounts: []Mount{
			{Source: vol, Target: "/etc/mlsysops-sandbox-test", ReadOnly: true},
			{Source: pw, Target: "/var/run/secrets/mlsysops-sandbox-test/password", ReadOnly: true},
			{Source: vol, Target: "/mlsysops-sandbox-test/v"},
		},
		UID: 65532, GID: 65532, WorkDir: "/etc/mlsysops-sandbox-test",
		Argv: []string{"sh", "-c", `cat x; echo; cat /var/run/secrets/mlsysops-sandbox-test/password; echo; id -u; pwd; ls /mlsysops-sandbox-test/v; touch x 2>/dev/null && echo writable || echo read-only`},
		Env:  []string{"PATH=/usr/bin:/bin"},
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := s.Command(self)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	want := "from the volume\ns3cret\n65532\n/etc/mlsysops-sandbox-test\nx\nread-only\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	for _, p := range []string{"/etc/mlsysops-sandbox-test", "/run/secrets/mlsysops-sandbox-test", "/mlsysops-sandbox-test"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the sandbox left %s on the host", p)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	if strings.Contains(string(mounts), s.Dir) {
		t.Errorf("the sandbox's mounts leaked into the host's namespace")
	}
}
