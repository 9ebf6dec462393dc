package placement

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Assumed is the ledger of placements made but not yet visible in what the
// member clusters report, as kube-scheduler's assume cache: capacity
// reports arrive every few seconds, so without it a burst of applications
// is placed on the same stale free capacity, all on one cluster.
//
// Each assumption holds what the application's components take on each
// node of its clusters in the simulated placement (PlaceApp's Requests)
// and is added to those nodes' requested resources until a capacity read
// of the cluster taken after the application's pods were seen (Visible)
// replaces it, the application is removed or moved (Forget), or TTL passes.
// It is safe for concurrent use.
type Assumed struct {
	// TTL bounds how long an assumption is kept when its pods are never
	// seen (they could not start, or the application stalled).
	TTL time.Duration

	mu   sync.Mutex
	apps map[string]*assumption
	now  func() time.Time
}

type assumption struct {
	// requests by cluster, then node.
	requests map[string]map[string]corev1.ResourceList
	at       time.Time
	// visible is when the application's pods were first seen on its
	// clusters; zero until then.
	visible time.Time
}

// NewAssumed returns an empty ledger whose assumptions expire after ttl.
func NewAssumed(ttl time.Duration) *Assumed {
	return &Assumed{TTL: ttl, apps: map[string]*assumption{}, now: time.Now}
}

// Assume records the placement d of app, replacing any earlier one.
func (a *Assumed) Assume(app string, d ClusterDecision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(d.Requests) == 0 {
		delete(a.apps, app)
		return
	}
	a.apps[app] = &assumption{requests: d.Requests, at: a.now()}
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
	delete(a.apps, app)
}

// Len counts the applications assumed.
func (a *Assumed) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.apps)
}

// Apply returns clusters with every assumption still in force added to
// the requested resources of its nodes. clusters are not modified (they
// may be a shared cached read): a cluster with assumptions is copied.
// Assumptions past TTL, and those of a cluster read after their pods were
// seen (Cluster.AsOf), are dropped on the way.
func (a *Assumed) Apply(clusters []Cluster) []Cluster {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	out := make([]Cluster, len(clusters))
	for i := range clusters {
		c := clusters[i]
		var nodes []Node
		for app, as := range a.apps {
			if now.Sub(as.at) > a.TTL {
				delete(a.apps, app)
				continue
			}
			req, ok := as.requests[c.Name]
			if !ok {
				continue
			}
			if !as.visible.IsZero() && c.AsOf.After(as.visible) {
				delete(as.requests, c.Name)
				if len(as.requests) == 0 {
					delete(a.apps, app)
				}
				continue
			}
			if nodes == nil {
				nodes = copyNodes(c.Nodes)
			}
			for j := range nodes {
				for res, q := range req[nodes[j].Name()] {
					add(nodes[j].Requested, res, q)
				}
			}
		}
		if nodes != nil {
			c.Nodes = nodes
		}
		out[i] = c
	}
	return out
}

// copyNodes copies nodes with their requested resources, which may then
// be changed.
func copyNodes(in []Node) []Node {
	out := make([]Node, len(in))
	for i := range in {
		out[i] = in[i]
		out[i].Requested = in[i].Requested.DeepCopy()
		if out[i].Requested == nil {
			out[i].Requested = corev1.ResourceList{}
		}
	}
	return out
}
