package agent

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

// TestMetricsWithControllerRegistry: /metrics serves the controllers'
// families of the shared registry beside the agent's own, and stays
// whole when that registry also holds families the agent has (the Go
// runtime's: collected twice, they failed the whole answer with a 500).
func TestMetricsWithControllerRegistry(t *testing.T) {
	shared := prometheus.NewRegistry()
	shared.MustRegister(collectors.NewGoCollector())
	adds := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "adds"}, []string{"name", "controller"})
	shared.MustRegister(adds)
	adds.WithLabelValues("continuum-placement", "continuum-placement").Add(3)
	saved := sharedGatherers
	sharedGatherers = []prometheus.Gatherer{controllerGatherer(shared)}
	defer func() { sharedGatherers = saved }()

	own := prometheus.NewRegistry()
	own.MustRegister(collectors.NewGoCollector())
	r := &replica{
		opts: &agentconfig.Options{Layer: agentconfig.LayerCluster, NodeName: "c1"}, conn: NewConnection(),
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: own,
		identity: "c1-1", camp: &fakeCampaign{leader: "c1-0"}, started: time.Now(),
	}
	srv := httptest.NewServer(r.handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", resp.StatusCode, body)
	}
	want := `workqueue_adds_total{controller="continuum-placement",name="continuum-placement"} 3`
	if !strings.Contains(string(body), want+"\n") {
		t.Errorf("/metrics has no %s", want)
	}
	if n := strings.Count(string(body), "\ngo_goroutines "); n != 1 {
		t.Errorf("go_goroutines served %d times, want once", n)
	}
}
