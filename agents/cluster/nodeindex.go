package cluster

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// handlerAdder is an informer, from client-go or controller-runtime.
type handlerAdder interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
}

// indexFeed keeps a placement index of the member cluster up to date from
// its informers, change by change, so that placing a component reads
// what is already counted instead of summing every pod of the cluster.
type indexFeed struct {
	index *placement.Index
	// changed, when set, hears of every change.
	changed func()

	mu   sync.Mutex
	regs []cache.ResourceEventHandlerRegistration
}

// feed registers the handlers: nodes and pods are required, descs (the
// MLSysOpsNode informer) may be nil.
func (f *indexFeed) feed(nodes, pods, descs handlerAdder) error {
	return f.register(nodes, pods, descs, true)
}

// feedDescriptions follows an MLSysOpsNode informer as well; synced does
// not wait for it.
func (f *indexFeed) feedDescriptions(descs handlerAdder) error {
	return f.register(nil, nil, descs, false)
}

func (f *indexFeed) register(nodes, pods, descs handlerAdder, required bool) error {
	poke := func() {
		if f.changed != nil {
			f.changed()
		}
	}
	handlers := []struct {
		inf    handlerAdder
		upsert func(any)
		del    func(any)
	}{
		{nodes, func(o any) {
			if n, ok := o.(*corev1.Node); ok {
				f.index.UpsertNode(n)
			}
		}, func(o any) {
			if n, ok := o.(*corev1.Node); ok {
				f.index.DeleteNode(n.Name)
			}
		}},
		{pods, func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				f.index.UpsertPod(p)
			}
		}, func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				f.index.DeletePod(p.Namespace, p.Name)
			}
		}},
		{descs, func(o any) {
			if d, ok := o.(*mlsysopsv1.MLSysOpsNode); ok && d.Namespace == mlsysopsv1.Namespace {
				f.index.SetDescription(d.Name, &d.Spec)
			}
		}, func(o any) {
			if d, ok := o.(*mlsysopsv1.MLSysOpsNode); ok && d.Namespace == mlsysopsv1.Namespace {
				f.index.SetDescription(d.Name, nil)
			}
		}},
	}
	for _, h := range handlers {
		if h.inf == nil {
			continue
		}
		upsert, del := h.upsert, h.del
		reg, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { upsert(o); poke() },
			UpdateFunc: func(_, o any) { upsert(o); poke() },
			DeleteFunc: func(o any) {
				if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				del(o)
				poke()
			},
		})
		if err != nil {
			return err
		}
		if required {
			f.mu.Lock()
			f.regs = append(f.regs, reg)
			f.mu.Unlock()
		}
	}
	return nil
}

// synced reports whether the index holds everything the informers listed
// when they started.
func (f *indexFeed) synced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return len(f.regs) > 0
}
