package kubelite

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFromKubeconfig reads a kubeconfig whose CA is a relative file and
// whose token is in a file, and sends a request with them.
func TestFromKubeconfig(t *testing.T) {
	var gotAuth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		switch r.URL.Path {
		case "/api/v1/namespaces/default/events/x":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","reason":"NotFound","message":"events \"x\" not found"}`))
		default:
			_, _ = w.Write([]byte(`{"kind":"EventList"}`))
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("tok-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := `apiVersion: v1
kind: Config
current-context: other
clusters:
- name: c
  cluster: {server: "` + srv.URL + `", certificate-authority: ca.crt}
users:
- name: u
  user: {tokenFile: token}
contexts:
- name: member
  context: {cluster: c, user: u, namespace: ns1}
- name: other
  context: {cluster: missing, user: u}
`
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := FromKubeconfig(path, "member")
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "ns1" {
		t.Errorf("namespace %q", c.Namespace)
	}
	var out struct{ Kind string }
	if err := c.Do(context.Background(), http.MethodGet, "/api/v1/events", "", nil, &out); err != nil || out.Kind != "EventList" {
		t.Fatalf("GET: %+v, %v", out, err)
	}
	if gotAuth != "Bearer tok-1" {
		t.Errorf("Authorization %q", gotAuth)
	}
	err = c.Do(context.Background(), http.MethodPatch, "/api/v1/namespaces/default/events/x", "application/merge-patch+json", map[string]int{"count": 2}, nil)
	if !IsStatus(err, http.StatusNotFound) || !strings.Contains(err.Error(), `events "x" not found`) {
		t.Errorf("PATCH of a missing object: %v", err)
	}
	// The current context names a cluster that does not exist.
	if _, err := FromKubeconfig(path, ""); err == nil || !strings.Contains(err.Error(), `cluster "missing"`) {
		t.Errorf("current context: %v", err)
	}
	if _, err := FromKubeconfig(path, "nope"); err == nil || !strings.Contains(err.Error(), "no such context") {
		t.Errorf("missing context: %v", err)
	}
}

func TestInClusterOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := InCluster(); err != ErrNotConfigured {
		t.Errorf("InCluster() outside a pod: %v", err)
	}
}
