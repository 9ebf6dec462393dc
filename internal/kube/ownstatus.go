package kube

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// OwnStatus remembers, for each object, the status a controller last
// wrote to it (as the API server returned it), so that the controller can
// skip the echo of that write — and only that — and know when its cache
// is behind its own writes.
//
// Skipping every status-only update (BeyondStatus alone) is not enough for
// a controller that compares what it would write with its cache: a pass
// that runs before the echo of its previous write reaches the cache sees
// the status from before that write. If what it would write equals that
// stale status it writes nothing; a merge patch from it leaves out the
// fields that equal it. Either way the server keeps the previous write's
// status, and no later event corrects it once the echo is skipped. With
// OwnStatus the controller writes nothing only when its cache shows its
// last write (Current), and otherwise writes under an optimistic lock
// (refused while the cache is behind, then done again); echoes of earlier
// writes and status writes by anyone else bring a pass.
type OwnStatus[T client.Object] struct {
	status func(T) any

	mu   sync.Mutex
	last map[types.NamespacedName]ownWrite
}

// ownWrite is a status write as the API server returned it.
type ownWrite struct {
	status any
	rv     string
}

// NewOwnStatus returns an empty record; status returns an object's status
// (a copy its caller may keep).
func NewOwnStatus[T client.Object](status func(T) any) *OwnStatus[T] {
	return &OwnStatus[T]{status: status, last: map[types.NamespacedName]ownWrite{}}
}

// Wrote records obj's status as the controller's last write: obj is as
// the API server returned it.
func (o *OwnStatus[T]) Wrote(obj T) {
	w := ownWrite{status: o.status(obj), rv: obj.GetResourceVersion()}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last[client.ObjectKeyFromObject(obj)] = w
}

// Current reports whether obj (read from the cache) shows the status the
// controller last wrote to it, or the controller wrote none since it
// started (or forgot the object).
func (o *OwnStatus[T]) Current(obj T) bool {
	recorded, shown := o.shows(obj)
	return !recorded || shown
}

// Behind reports whether obj (read from the cache) is older than the
// controller's last status write to it: a write under an optimistic lock
// on obj could only be refused. It is false when the versions do not
// order (see SameOrNewer), and for a newer copy that shows another
// writer's status: that one may be written over, under the lock.
func (o *OwnStatus[T]) Behind(obj T) bool {
	last, recorded := o.lookup(obj)
	rv := obj.GetResourceVersion()
	return recorded && rv != last.rv && SameOrNewer(last.rv, rv)
}

// shows reports whether a write to obj is recorded, and whether obj
// shows the last one.
func (o *OwnStatus[T]) shows(obj T) (recorded, shown bool) {
	last, recorded := o.lookup(obj)
	return recorded, recorded && equality.Semantic.DeepEqual(last.status, o.status(obj))
}

// lookup returns the last write recorded for obj.
func (o *OwnStatus[T]) lookup(obj T) (ownWrite, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.last[client.ObjectKeyFromObject(obj)]
	return w, ok
}

// Forget drops what was recorded for the object (it is gone).
func (o *OwnStatus[T]) Forget(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.last, key)
}

// Len is the number of objects with a recorded write.
func (o *OwnStatus[T]) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.last)
}

// Predicate passes creation, deletion and generic events, updates that
// change more than the status (BeyondStatus), and status updates other
// than the echo of the controller's last write.
func (o *OwnStatus[T]) Predicate() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if BeyondStatus.Update(e) {
			return true
		}
		obj, ok := e.ObjectNew.(T)
		if !ok {
			return true
		}
		_, echo := o.shows(obj)
		return !echo
	}}
}

// OwnStatusRetry is how soon a pass comes again whose status write was
// refused because its cache did not show the last write yet (the skipped
// echo of that write would not bring it).
const OwnStatusRetry = 200 * time.Millisecond
