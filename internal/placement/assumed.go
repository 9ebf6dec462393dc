package placement

import (
	"sync"
	"time"
)

// Assumed is the ledger of placements made but not yet visible in what the
// member clusters report, as kube-scheduler's assume cache: capacity
// reports arrive every few seconds, so without it a burst of applications
// is placed on the same stale free capacity, all on one cluster.
//
// Each assumption holds what the application's components take on each
// node of its clusters in the simulated placement (PlaceApp's Requests)
// and is counted on those nodes until a capacity read of the cluster
// taken after the application's pods were seen (Visible; the cluster's
// Index.AsOf) replaces it, the application is removed or moved (Forget),
// or TTL passes. The ledger keeps, by cluster, the sum of the
// assumptions in force, so a decision costs nothing per assumption.
// It is safe for concurrent use.
type Assumed struct {
	// TTL bounds how long an assumption is kept when its pods are never
	// seen (they could not start, or the application stalled).
	TTL time.Duration

	mu   sync.Mutex
	apps map[string]*assumption
	// total sums, by cluster, the assumptions in force.
	total map[string]Usage
	now   func() time.Time
}

type assumption struct {
	// took by cluster.
	took map[string]Usage
	at   time.Time
	// visible is when the application's pods were first seen on its
	// clusters; zero until then.
	visible time.Time
}

// NewAssumed returns an empty ledger whose assumptions expire after ttl.
func NewAssumed(ttl time.Duration) *Assumed {
	return &Assumed{TTL: ttl, apps: map[string]*assumption{}, total: map[string]Usage{}, now: time.Now}
}

// PlaceApp places an application (named app in the ledger) as PlaceApp
// does, counting every assumption in force, and assumes what it takes
// when it is placed. Reading the ledger, choosing and recording happen
// under one lock, so concurrent placements see each other.
func (a *Assumed) PlaceApp(app string, req AppRequest, clusters []Cluster) (ClusterDecision, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	names, asOf := make([]string, len(clusters)), make([]time.Time, len(clusters))
	for i := range clusters {
		names[i], asOf[i] = clusters[i].Name, clusters[i].asOf()
	}
	a.pruneLocked(names, asOf)
	d, err := placeApp(req, clusters, a.total)
	if err == nil && d.Feasible() {
		a.assumeLocked(app, d)
	}
	return d, err
}

// Assume records the placement d of app, replacing any earlier one.
func (a *Assumed) Assume(app string, d ClusterDecision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.assumeLocked(app, d)
}

func (a *Assumed) assumeLocked(app string, d ClusterDecision) {
	a.dropLocked(app)
	if len(d.Requests) == 0 {
		return
	}
	as := &assumption{took: make(map[string]Usage, len(d.Requests)), at: a.now()}
	for cluster, byNode := range d.Requests {
		u := Usage{}
		for node, list := range byNode {
			u.Add(node, list, 1)
		}
		as.took[cluster] = u
		a.countLocked(cluster, u, 1)
	}
	a.apps[app] = as
}

// Visible records that app's pods now exist on its clusters (it runs):
// the next capacity read of a cluster taken after now includes them and
// ends the assumption there. Only the first call counts.
func (a *Assumed) Visible(app string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if as, ok := a.apps[app]; ok && as.visible.IsZero() {
		as.visible = a.now()
	}
}

// Forget drops app's assumption (removed, moved, or not placed after all).
func (a *Assumed) Forget(app string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropLocked(app)
}

// Len counts the applications assumed.
func (a *Assumed) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.apps)
}

// Usage returns, for a cluster read at asOf, what the assumptions in
// force count on its nodes; assumptions that expired or that a read at
// asOf shows are dropped on the way. The result is a copy.
func (a *Assumed) Usage(cluster string, asOf time.Time) Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pruneLocked([]string{cluster}, []time.Time{asOf})
	out := Usage{}
	for node, v := range a.total[cluster] {
		out[node] = v
	}
	return out
}

// pruneLocked drops the assumptions past TTL and, for each cluster named,
// those of applications seen running before it was read (asOf).
func (a *Assumed) pruneLocked(names []string, asOf []time.Time) {
	now := a.now()
	for app, as := range a.apps {
		if now.Sub(as.at) > a.TTL {
			a.dropLocked(app)
			continue
		}
		if as.visible.IsZero() {
			continue
		}
		for i, name := range names {
			u, ok := as.took[name]
			if !ok || !asOf[i].After(as.visible) {
				continue
			}
			a.countLocked(name, u, -1)
			delete(as.took, name)
		}
		if len(as.took) == 0 {
			delete(a.apps, app)
		}
	}
}

func (a *Assumed) dropLocked(app string) {
	as, ok := a.apps[app]
	if !ok {
		return
	}
	for cluster, u := range as.took {
		a.countLocked(cluster, u, -1)
	}
	delete(a.apps, app)
}

// countLocked adds k times u to the cluster's total.
func (a *Assumed) countLocked(cluster string, u Usage, k int64) {
	total := a.total[cluster]
	if total == nil {
		total = Usage{}
		a.total[cluster] = total
	}
	for node, v := range u {
		if sum := total[node].plus(v, k); sum.zero() {
			delete(total, node)
		} else {
			total[node] = sum
		}
	}
	if len(total) == 0 {
		delete(a.total, cluster)
	}
}
