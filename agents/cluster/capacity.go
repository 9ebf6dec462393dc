package cluster

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// capacityReporter sends the cluster's capacity to the continuum agent:
// within a second of a change to a node or a pod's requests, and at least
// every interval, so the continuum knows the report is current.
//
// With the fluidity controllers running it reads their placement index
// (shared, set by attach): the nodes and pods it needs are those the
// controllers follow, and a second watch of every pod and node of the
// member would cost the agent a decoding and the API server a stream of
// each of their changes. Without the controllers it follows them itself.
type capacityReporter struct {
	a        *agent.Agent
	cs       kubernetes.Interface
	interval time.Duration
	changed  chan struct{}
	// own is whether the reporter watches nodes and pods itself; when
	// false it reports from the index attach hands it.
	own    bool
	shared atomic.Pointer[indexFeed]

	mu       sync.Mutex
	last     *messaging.CapacityReport
	lastSent time.Time
	sent     int
}

func newCapacityReporter(a *agent.Agent, cs kubernetes.Interface, interval time.Duration, own bool) *capacityReporter {
	return &capacityReporter{a: a, cs: cs, interval: interval, changed: make(chan struct{}, 1), own: own}
}

// attach makes the reporter report from feed's index, and hear of its
// changes, until the returned detach is called. feed's informers must not
// have started: its change hook is set here.
func (r *capacityReporter) attach(feed *indexFeed) (detach func()) {
	feed.changed = r.poke
	r.shared.Store(feed)
	r.poke()
	return func() { r.shared.CompareAndSwap(feed, nil) }
}

func (r *capacityReporter) poke() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// run reports until ctx ends, from its own index or the attached one.
func (r *capacityReporter) run(ctx context.Context) {
	if !r.own {
		r.loop(ctx, func() *placement.Index {
			if f := r.shared.Load(); f != nil && f.synced() {
				return f.index
			}
			return nil
		})
		return
	}
	r.runOwn(ctx)
}

// runOwn watches nodes and the pods that hold resources until ctx ends.
func (r *capacityReporter) runOwn(ctx context.Context) {
	nodesF := informers.NewSharedInformerFactoryWithOptions(r.cs, 0, informers.WithTransform(crcache.TransformStripManagedFields()))
	podsF := informers.NewSharedInformerFactoryWithOptions(r.cs, 0, informers.WithTransform(crcache.TransformStripManagedFields()),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "status.phase!=Succeeded,status.phase!=Failed"
		}))
	feed := &indexFeed{index: placement.NewIndex(), changed: r.poke}
	if err := feed.feed(nodesF.Core().V1().Nodes().Informer(), podsF.Core().V1().Pods().Informer(), nil); err != nil {
		r.a.Log.Warn("capacity reports off: node and pod watches", "err", err)
		return
	}
	nodesF.Start(ctx.Done())
	podsF.Start(ctx.Done())
	defer nodesF.Shutdown()
	defer podsF.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), feed.synced) {
		return
	}
	r.loop(ctx, func() *placement.Index { return feed.index })
}

// loop reports the index index returns (nil: none to report from now)
// after each change and every interval.
func (r *capacityReporter) loop(ctx context.Context, index func() *placement.Index) {
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
		if idx := index(); idx != nil {
			r.report(ctx, idx)
		}
	}
}

// report sends the current capacity if it changed or is due.
func (r *capacityReporter) report(ctx context.Context, idx *placement.Index) {
	if !r.a.Registered.Load() {
		return
	}
	rep := idx.Report(r.a.Name, time.Now())
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
