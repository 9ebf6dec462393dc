package cluster

import (
	"context"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// capacityReporter sends the cluster's capacity to the continuum agent:
// within a second of a change to a node or a pod's requests, and at least
// every interval, so the continuum knows the report is current.
type capacityReporter struct {
	a        *agent.Agent
	cs       kubernetes.Interface
	interval time.Duration
	changed  chan struct{}

	mu       sync.Mutex
	last     *messaging.CapacityReport
	lastSent time.Time
	sent     int
}

func newCapacityReporter(a *agent.Agent, cs kubernetes.Interface, interval time.Duration) *capacityReporter {
	return &capacityReporter{a: a, cs: cs, interval: interval, changed: make(chan struct{}, 1)}
}

func (r *capacityReporter) poke() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// run watches nodes and the pods that hold resources until ctx ends.
func (r *capacityReporter) run(ctx context.Context) {
	nodesF := informers.NewSharedInformerFactory(r.cs, 0)
	podsF := informers.NewSharedInformerFactoryWithOptions(r.cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "status.phase!=Succeeded,status.phase!=Failed"
	}))
	nodes, pods := nodesF.Core().V1().Nodes(), podsF.Core().V1().Pods()
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.poke() },
		UpdateFunc: func(any, any) { r.poke() },
		DeleteFunc: func(any) { r.poke() },
	}
	if _, err := nodes.Informer().AddEventHandler(poke); err != nil {
		r.a.Log.Warn("capacity reports off: node watch", "err", err)
		return
	}
	if _, err := pods.Informer().AddEventHandler(poke); err != nil {
		r.a.Log.Warn("capacity reports off: pod watch", "err", err)
		return
	}
	nodesF.Start(ctx.Done())
	podsF.Start(ctx.Done())
	defer nodesF.Shutdown()
	defer podsF.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced, pods.Informer().HasSynced) {
		return
	}
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.changed:
			// Let a burst of changes (a Deployment's pods) settle.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		r.report(ctx, nodes.Lister().List, pods.Lister().List)
	}
}

// report sends the current capacity if it changed or is due.
func (r *capacityReporter) report(ctx context.Context, listNodes func(labels.Selector) ([]*corev1.Node, error), listPods func(labels.Selector) ([]*corev1.Pod, error)) {
	if !r.a.Registered.Load() {
		return
	}
	ns, err := listNodes(labels.Everything())
	if err != nil {
		return
	}
	ps, err := listPods(labels.Everything())
	if err != nil {
		return
	}
	nodes := make([]corev1.Node, len(ns))
	for i, n := range ns {
		nodes[i] = *n
	}
	pods := make([]corev1.Pod, len(ps))
	for i, p := range ps {
		pods[i] = *p
	}
	rep := placement.Report(r.a.Name, nodes, pods, time.Now())
	r.mu.Lock()
	due := r.last == nil || time.Since(r.lastSent) >= r.interval || !sameCapacity(r.last, rep)
	r.mu.Unlock()
	if !due {
		return
	}
	if _, err := r.a.Msg.SendAsync(ctx, r.a.Parent, rep); err != nil {
		r.a.Log.Warn("capacity report not queued", "err", err)
		return
	}
	r.mu.Lock()
	r.last, r.lastSent = rep, time.Now()
	r.sent++
	r.mu.Unlock()
	r.a.Log.Debug("capacity reported", "ready_nodes", rep.ReadyNodes, "nodes", len(rep.Nodes))
}

// sameCapacity compares two reports but for their time.
func sameCapacity(a, b *messaging.CapacityReport) bool {
	x, y := *a, *b
	x.Time, y.Time = time.Time{}, time.Time{}
	return reflect.DeepEqual(x, y)
}

// status is the reporter's view for /status.
func (r *capacityReporter) status() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]any{"reports_sent": r.sent}
	if r.last != nil {
		out["last_report"] = r.lastSent.UTC().Format(time.RFC3339)
		out["ready_nodes"] = r.last.ReadyNodes
		out["gpus"] = r.last.GPUs
	}
	return out
}
