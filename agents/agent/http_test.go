package agent

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

// TestHTTPToken: with --http-token-file, /status, POST /ping and the
// profiles answer only the bearer token in the file (read at each
// request: a replaced token counts at once), while the probes and
// /metrics stay open.
func TestHTTPToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	write := func(tok string) {
		if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first-token-0123456789")
	conn := NewConnection()
	conn.HTTPTokenFile, conn.Profiling = file, true
	if err := conn.Validate(agentconfig.LayerNode); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	r := &replica{
		opts: &agentconfig.Options{Layer: agentconfig.LayerCluster, NodeName: "c1"}, conn: conn,
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: prometheus.NewRegistry(),
		identity: "c1-1", camp: &fakeCampaign{leader: "c1-0"}, started: time.Now(),
	}
	r.observeLeader("c1-0")
	srv := httptest.NewServer(r.handler())
	defer srv.Close()
	call := func(method, path, token string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// A follower answers /ping with 503 (the leader pings): past the
	// token, that is what it says.
	cases := []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/status", "", http.StatusUnauthorized},
		{"GET", "/status", "wrong-token-0123456789", http.StatusUnauthorized},
		{"GET", "/status", "first-token-0123456789", http.StatusOK},
		{"POST", "/ping", "", http.StatusUnauthorized},
		{"POST", "/ping", "first-token-0123456789", http.StatusServiceUnavailable},
		{"GET", "/debug/pprof/cmdline", "", http.StatusUnauthorized},
		{"GET", "/debug/pprof/cmdline", "first-token-0123456789", http.StatusOK},
		{"GET", "/healthz", "", http.StatusOK},
		{"GET", "/readyz", "", http.StatusOK},
		{"GET", "/metrics", "", http.StatusOK},
	}
	for _, c := range cases {
		if got := call(c.method, c.path, c.token); got != c.want {
			t.Errorf("%s %s with token %q: %d, want %d", c.method, c.path, c.token, got, c.want)
		}
	}
	write("second-token-0123456789")
	if got := call("GET", "/status", "first-token-0123456789"); got != http.StatusUnauthorized {
		t.Errorf("the replaced token: %d, want 401", got)
	}
	if got := call("GET", "/status", "second-token-0123456789"); got != http.StatusOK {
		t.Errorf("the new token: %d, want 200", got)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if got := call("GET", "/status", "second-token-0123456789"); got != http.StatusUnauthorized {
		t.Errorf("with the token file gone: %d, want 401 (closed, not open)", got)
	}

	conn.HTTPTokenFile = filepath.Join(t.TempDir(), "none")
	if err := conn.Validate(agentconfig.LayerNode); err == nil {
		t.Error("Validate accepts a missing token file")
	}
}
