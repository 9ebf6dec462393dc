package continuum

import (
	"fmt"
	"sync"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// Reports keeps the latest capacity report of each cluster agent, for
// cluster placement: each cluster's nodes live in a placement.Index that
// every report updates in place (only what changed), so a placement never
// converts a report. A report older than MaxAge is ignored: placement then
// reads that cluster through Karmada.
type Reports struct {
	// MaxAge is how long a report is trusted.
	MaxAge time.Duration

	mu      sync.Mutex
	reports map[string]*reported
	now     func() time.Time
}

type reported struct {
	rep *messaging.CapacityReport
	// index holds the nodes of the last report that listed them.
	index *placement.Index
	// listed says the last report listed its nodes (a report too large
	// to list them carries only totals).
	listed bool
	at     time.Time
	// applying serialises the reports of the cluster.
	applying sync.Mutex
}

// NewReports returns an empty report store trusting reports for maxAge.
func NewReports(maxAge time.Duration) *Reports {
	return &Reports{MaxAge: maxAge, reports: map[string]*reported{}, now: time.Now}
}

// Put keeps a cluster's report. It fails, keeping the previous one, when
// the report's nodes cannot be read. A report written before the one kept
// (delivered late) is ignored.
func (r *Reports) Put(rep *messaging.CapacityReport) error {
	r.mu.Lock()
	got := r.reports[rep.Cluster]
	if got == nil {
		got = &reported{index: placement.NewIndex()}
		r.reports[rep.Cluster] = got
	}
	r.mu.Unlock()
	// One cluster's reports are applied one at a time, beside other
	// clusters' and beside placements reading the index.
	got.applying.Lock()
	defer got.applying.Unlock()
	r.mu.Lock()
	late := got.rep != nil && rep.Time.Before(got.rep.Time)
	r.mu.Unlock()
	if late {
		return nil
	}
	now := r.now()
	if rep.Nodes != nil {
		if err := got.index.ApplyReport(rep, now); err != nil {
			return fmt.Errorf("capacity report of %s: %w", rep.Cluster, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	got.rep, got.listed, got.at = rep, rep.Nodes != nil, now
	return nil
}

// Nodes returns the nodes of a cluster's fresh report; ok is false when
// there is none or it carries no node list.
func (r *Reports) Nodes(cluster string) (nodes []placement.NodeState, ok bool) {
	idx, ok := r.index(cluster)
	if !ok {
		return nil, false
	}
	return idx.Nodes(), true
}

// Latest returns a copy of every cluster's latest report, fresh or not,
// with when it arrived.
func (r *Reports) Latest() map[string]ReportInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]ReportInfo, len(r.reports))
	for name, got := range r.reports {
		if got.rep == nil {
			continue
		}
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

// index returns the index of a cluster's fresh report, on a store that
// may be nil; ok is false when there is no fresh report listing nodes.
// The index is live: later reports update it.
func (r *Reports) index(cluster string) (*placement.Index, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	got, found := r.reports[cluster]
	if !found || got.rep == nil || !got.listed || r.now().Sub(got.at) > r.MaxAge {
		return nil, false
	}
	return got.index, true
}
