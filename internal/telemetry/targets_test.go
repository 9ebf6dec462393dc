package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTargetScraper(t *testing.T) {
	serve := func(body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
		t.Cleanup(srv.Close)
		return srv.URL + "/metrics"
	}
	server := serve(`# TYPE demo_server_latency_seconds gauge
demo_server_latency_seconds 0.004
# TYPE demo_server_messages_total counter
demo_server_messages_total{app="inner"} 42
# TYPE other gauge
other 1
`)
	idle := serve(`# TYPE demo_server_latency_seconds gauge
demo_server_latency_seconds NaN
`)
	s := NewTargetScraper("apps", nil)
	if !s.SetTargets([]Target{
		{App: "demo", Component: "server", Pod: "server-1", URL: server},
		{App: "demo", Component: "server", Pod: "server-2", URL: idle},
		{App: "demo", Component: "client", Pod: "client-1", URL: "http://127.0.0.1:1/metrics"},
	}) {
		t.Fatal("SetTargets: first targets not a change")
	}
	if s.SetTargets(s.Targets()) {
		t.Error("SetTargets: the same targets are a change")
	}
	got, err := s.Collect(context.Background(), []string{"demo_server_latency_seconds", "demo_server_messages"})
	if err == nil || !strings.Contains(err.Error(), "demo/client pod client-1") {
		t.Errorf("err = %v, want the unreachable client named", err)
	}
	want := []Reading{
		{Name: "demo_server_latency_seconds", Labels: Labels{"app": "demo", "component": "server", "pod": "server-1"}, Value: 0.004},
		{Name: "demo_server_messages", Labels: Labels{"app": "demo", "component": "server", "pod": "server-1", "exported_app": "inner"}, Value: 42},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readings (-want +got):\n%s", diff)
	}
	latest, at := s.Latest()
	if diff := cmp.Diff(want, latest); diff != "" || at.IsZero() {
		t.Errorf("latest at %v (-want +got):\n%s", at, diff)
	}
	if got, _ := s.Collect(context.Background(), nil); got != nil {
		t.Errorf("nothing wanted: %v", got)
	}
}

func TestParseKey(t *testing.T) {
	cases := map[string]struct {
		key     string
		name    string
		labels  Labels
		wantErr bool
	}{
		"plain":        {key: "node_load1", name: "node_load1"},
		"labels":       {key: Key("x", Labels{"b": `q"uo,te}`, "a": "1"}), name: "x", labels: Labels{"a": "1", "b": `q"uo,te}`}},
		"empty labels": {key: "x{}", name: "x", labels: Labels{}},
		"no name":      {key: `{a="1"}`, wantErr: true},
		"unquoted":     {key: `x{a=1}`, wantErr: true},
		"unterminated": {key: `x{a="1"`, wantErr: true},
		"garbage":      {key: `x{a="1"b="2"}`, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n, l, err := ParseKey(tc.key)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if n != tc.name {
				t.Errorf("name = %q, want %q", n, tc.name)
			}
			if diff := cmp.Diff(tc.labels, l); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}
