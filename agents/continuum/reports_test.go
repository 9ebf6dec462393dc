package continuum

import (
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

func TestReportsFreshnessAndBadReports(t *testing.T) {
	now := time.Unix(1000, 0)
	r := NewReports(15 * time.Second)
	r.now = func() time.Time { return now }
	good := &messaging.CapacityReport{Cluster: "cloud-1", ReadyNodes: 1, Nodes: []messaging.NodeCapacity{{
		Name: "n1", Ready: true, Allocatable: map[string]string{"cpu": "4", "nvidia.com/gpu": "2"}, Requested: map[string]string{"cpu": "1"},
	}}}
	if err := r.Put(good); err != nil {
		t.Fatal(err)
	}
	nodes, ok := r.Nodes("cloud-1")
	if !ok || len(nodes) != 1 || nodes[0].Name != "n1" {
		t.Fatalf("nodes %v ok %v", nodes, ok)
	}
	if _, ok := r.Nodes("edge-1"); ok {
		t.Error("a cluster without a report has nodes")
	}

	// A bad report is refused and the previous one kept.
	bad := &messaging.CapacityReport{Cluster: "cloud-1", Nodes: []messaging.NodeCapacity{{Name: "n1", Allocatable: map[string]string{"cpu": "four"}}}}
	if err := r.Put(bad); err == nil || !strings.Contains(err.Error(), "nodes[0] (n1).allocatable") {
		t.Errorf("bad report: %v", err)
	}
	if nodes, ok := r.Nodes("cloud-1"); !ok || len(nodes) != 1 {
		t.Error("the good report was lost")
	}

	// A report without a node list (too large to send) leaves placement
	// to read the cluster through Karmada.
	if err := r.Put(&messaging.CapacityReport{Cluster: "big", ReadyNodes: 5000}); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Nodes("big"); ok {
		t.Error("a totals-only report gave nodes")
	}

	now = now.Add(16 * time.Second)
	if _, ok := r.Nodes("cloud-1"); ok {
		t.Error("a stale report is still used")
	}
	if info := r.Latest()["cloud-1"]; info.Fresh || info.Report.ReadyNodes != 1 {
		t.Errorf("latest: %+v", info)
	}
	var nilStore *Reports
	if _, ok := nilStore.index("cloud-1"); ok {
		t.Error("a nil store has nodes")
	}
}
