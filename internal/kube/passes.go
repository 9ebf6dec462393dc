package kube

import (
	"maps"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Passes records, per object name, the resourceVersion of the object the
// last successful reconcile of it read. It lets a reader (the agent's
// /status, a test) tell that a controller has acted on an object as it
// was at or after some change, rather than waiting and hoping it did.
type Passes struct {
	mu   sync.Mutex
	last map[string]string
}

// NewPasses returns an empty record.
func NewPasses() *Passes { return &Passes{last: map[string]string{}} }

// Done records a successful pass over name, which read resourceVersion rv.
func (p *Passes) Done(name, rv string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[name] = rv
}

// Forget drops name (the object is gone).
func (p *Passes) Forget(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, name)
}

// Last returns the resourceVersion the last successful pass over name
// read, "" when none completed.
func (p *Passes) Last(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last[name]
}

// Snapshot returns every name's last resourceVersion.
func (p *Passes) Snapshot() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.last)
}

// SameOrNewer reports whether resourceVersion rv is at or after since.
// resourceVersions are opaque to clients in general; those of an
// etcd-backed apiserver (every apiserver here) are etcd revisions, which
// only grow, so within one apiserver they order the writes.
func SameOrNewer(rv, since string) bool {
	a, errA := strconv.ParseUint(rv, 10, 64)
	b, errB := strconv.ParseUint(since, 10, 64)
	return errA == nil && errB == nil && a >= b
}

// SpecVersion names an object's spec as it is now: its uid and
// generation (which a write of the spec, and only that, moves when the
// status is a subresource).
func SpecVersion(o metav1.Object) string {
	return string(o.GetUID()) + "/" + strconv.FormatInt(o.GetGeneration(), 10)
}
