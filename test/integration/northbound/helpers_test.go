// Package northbound_test runs the northbound API against real components:
// a private Redis per test (testbed.Redis), and the shared testbed's
// Karmada, member clusters and ejabberd where a handler reads them.
package northbound_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/client"
	"github.com/mlsysops-go/mlsysops/northbound/handlers"
)

const (
	operatorToken = "test-operator-token-0123456789"
	viewerToken   = "test-viewer-token-0123456789"
)

// env is one API server on a real Redis.
type env struct {
	redis *services.Redis
	store *state.Store
	api   *handlers.API
	srv   *httptest.Server
	// op and view are clients with the operator and viewer tokens.
	op, view *client.Client
	reg      *prometheus.Registry
}

// newEnv starts Redis (unless cfg has a store) and the API with cfg's
// optional parts (Infra, Messenger, Policies).
func newEnv(t testing.TB, cfg handlers.Config) *env {
	t.Helper()
	e := &env{}
	if cfg.Store == nil {
		e.redis = testbed.Redis(t)
		rdb, err := state.NewClient(state.Config{Addrs: []string{e.redis.Addr()}, Password: e.redis.Password()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		log := cfg.Logger
		if log == nil {
			log = testLogger(t)
		}
		cfg.Store = state.New(rdb, state.Options{Logger: log})
	}
	e.store = cfg.Store
	cfg.Auth = auth.Static([]auth.Entry{
		{Token: operatorToken, Identity: auth.Identity{Name: "test-operator", Role: api.RoleOperator}},
		{Token: viewerToken, Identity: auth.Identity{Name: "test-viewer", Role: api.RoleViewer}},
	})
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	e.reg = prometheus.NewRegistry()
	cfg.Registerer, cfg.Gatherer = e.reg, e.reg
	a, err := handlers.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.api = a
	e.srv = httptest.NewServer(a)
	t.Cleanup(e.srv.Close)
	e.op = newClient(t, e.srv.URL, operatorToken)
	e.view = newClient(t, e.srv.URL, viewerToken)
	return e
}

func newClient(t testing.TB, url, token string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{URL: url, Token: token, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// do sends a raw request with a token ("" for none).
func (e *env) do(t testing.TB, method, path, token, contentType string, body []byte, hdr ...string) *client.Response {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body = http.NoBody
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &client.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: b}
}

// problem decodes a problem document and checks its envelope.
func problem(t testing.TB, r *client.Response, status int) api.Problem {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", r.StatusCode, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != api.MediaProblem {
		t.Fatalf("Content-Type %q, want %s: %s", ct, api.MediaProblem, r.Body)
	}
	var p api.Problem
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("not a problem document: %v: %s", err, r.Body)
	}
	if p.Status != status || p.Detail == "" || p.Title == "" || p.RequestID == "" || p.RequestID != r.Header.Get(api.HeaderRequestID) {
		t.Fatalf("problem document incomplete: %+v (header request id %q)", p, r.Header.Get(api.HeaderRequestID))
	}
	return p
}

func decode[T any](t testing.TB, r *client.Response, status int) T {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", r.StatusCode, status, r.Body)
	}
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, r.Body)
	}
	return v
}

func fields(ps []api.FieldProblem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Field
	}
	return out
}

func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("NORTHBOUND_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// repoFile reads a file of the repository.
func repoFile(t testing.TB, rel string) []byte {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// appJSON is a small valid application in the upstream form.
func appJSON(name string) []byte {
	return []byte(`{"MLSysOpsApp": {"name": "` + name + `", "components": [{"metadata": {"name": "web"},
	  "qos_metrics": [{"application_metric_id": "requests_per_second", "target": 100, "relation": "greater_or_equal"}],
	  "containers": [{"image": "registry.example.org/web:1", "platform_requirements": {"cpu": {"requests": "250m"}}}]}]}}`)
}

func uniq(prefix string) string { return prefix + "-" + rand.String(6) }
