package continuum

import (
	"fmt"
	"sync"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// Reports keeps the latest capacity report of each cluster agent, for
// cluster placement. A report older than MaxAge is ignored: placement then
// reads that cluster through Karmada.
type Reports struct {
	// MaxAge is how long a report is trusted.
	MaxAge time.Duration

	mu      sync.Mutex
	reports map[string]reported
	now     func() time.Time
}

type reported struct {
	rep   *messaging.CapacityReport
	nodes []placement.Node
	at    time.Time
}

// NewReports returns an empty report store trusting reports for maxAge.
func NewReports(maxAge time.Duration) *Reports {
	return &Reports{MaxAge: maxAge, reports: map[string]reported{}, now: time.Now}
}

// Put keeps a cluster's report. It fails, keeping the previous one, when
// the report's nodes cannot be read.
func (r *Reports) Put(rep *messaging.CapacityReport) error {
	nodes, err := placement.NodesFromReport(rep)
	if err != nil {
		return fmt.Errorf("capacity report of %s: %w", rep.Cluster, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports[rep.Cluster] = reported{rep: rep, nodes: nodes, at: r.now()}
	return nil
}

// Nodes returns the nodes of a cluster's fresh report; ok is false when
// there is none or it carries no node list.
func (r *Reports) Nodes(cluster string) (nodes []placement.Node, ok bool) {
	nodes, _, ok = r.nodes(cluster)
	return nodes, ok
}

// Latest returns a copy of every cluster's latest report, fresh or not,
// with when it arrived.
func (r *Reports) Latest() map[string]ReportInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]ReportInfo, len(r.reports))
	for name, got := range r.reports {
		out[name] = ReportInfo{Report: *got.rep, Received: got.at, Fresh: r.now().Sub(got.at) <= r.MaxAge}
	}
	return out
}

// ReportInfo is a stored report with when it arrived.
type ReportInfo struct {
	Report   messaging.CapacityReport
	Received time.Time
	Fresh    bool
}

// nodes is Nodes, with when the report arrived, on a store that may be
// nil.
func (r *Reports) nodes(cluster string) ([]placement.Node, time.Time, bool) {
	if r == nil {
		return nil, time.Time{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	got, found := r.reports[cluster]
	if !found || got.rep.Nodes == nil || r.now().Sub(got.at) > r.MaxAge {
		return nil, time.Time{}, false
	}
	return got.nodes, got.at, true
}
