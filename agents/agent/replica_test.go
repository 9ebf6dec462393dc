package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

// fakeCampaign is a Campaign whose leader and API health the test sets.
type fakeCampaign struct {
	leader string
	apiErr error
}

func (f *fakeCampaign) Run(ctx context.Context, _ func(context.Context)) error {
	<-ctx.Done()
	return nil
}
func (f *fakeCampaign) Lease() string               { return "mlsysops/mlsysops-cluster-c1" }
func (f *fakeCampaign) Leader() string              { return f.leader }
func (f *fakeCampaign) Ready(context.Context) error { return f.apiErr }

func TestFollowerAnswers(t *testing.T) {
	cases := map[string]struct {
		apiErr                error
		wantReady, wantPing   int
		wantReadyBodyContains string
	}{
		"lease API answers":   {wantReady: http.StatusOK, wantPing: http.StatusServiceUnavailable, wantReadyBodyContains: "ok"},
		"lease API unreached": {apiErr: errors.New("connection refused"), wantReady: http.StatusServiceUnavailable, wantPing: http.StatusServiceUnavailable, wantReadyBodyContains: "lease's API does not answer"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			camp := &fakeCampaign{leader: "c1-0", apiErr: tc.apiErr}
			r := &replica{
				opts: &agentconfig.Options{Layer: agentconfig.LayerCluster, NodeName: "c1"}, conn: NewConnection(),
				log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: prometheus.NewRegistry(),
				identity: "c1-1", camp: camp, started: time.Now(),
			}
			r.observeLeader("c1-0")
			srv := httptest.NewServer(r.handler())
			defer srv.Close()

			resp, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantReady || !strings.Contains(string(body), tc.wantReadyBodyContains) {
				t.Errorf("/readyz: %d %q, want %d with %q", resp.StatusCode, body, tc.wantReady, tc.wantReadyBodyContains)
			}

			resp, err = http.Post(srv.URL+"/ping", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantPing || !strings.Contains(string(body), "the leader is c1-0") {
				t.Errorf("/ping: %d %q, want %d naming the leader", resp.StatusCode, body, tc.wantPing)
			}

			resp, err = http.Get(srv.URL + "/status")
			if err != nil {
				t.Fatal(err)
			}
			var st struct {
				Name     string            `json:"name"`
				Election map[string]string `json:"election"`
			}
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{"name": st.Name, "role": st.Election["role"], "identity": st.Election["identity"], "leader": st.Election["leader"], "lease": st.Election["lease"]}
			want := map[string]string{"name": "c1", "role": "follower", "identity": "c1-1", "leader": "c1-0", "lease": "mlsysops/mlsysops-cluster-c1"}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("/status (-want +got):\n%s", d)
			}
		})
	}
}

func TestDefaultIdentityDiffers(t *testing.T) {
	if a, b := defaultIdentity(), defaultIdentity(); a == b {
		t.Errorf("two default identities are both %q", a)
	}
}
