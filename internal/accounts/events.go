package accounts

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/mlsysops-go/mlsysops/internal/messaging/authreport"
)

// reportFunc hands an account reported by an Event to the reconciler.
type reportFunc func(account, source string) bool

// source is one cluster whose agents' Events are watched.
type source struct {
	name string
	cfg  *rest.Config
}

// watcher keeps one informer per source on the agents' login failure
// Events.
type watcher struct {
	log       *slog.Logger
	namespace string
	maxAge    time.Duration
	report    reportFunc
	errors    *prometheus.CounterVec
	events    *prometheus.CounterVec

	mu      sync.Mutex
	running map[string]context.CancelFunc
	synced  map[string]bool
}

func newWatcher(log *slog.Logger, namespace string, maxAge time.Duration, report reportFunc) *watcher {
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: "mlsysops", Subsystem: "accounts", Name: name, Help: help}
	}
	return &watcher{
		log: log, namespace: namespace, maxAge: maxAge, report: report,
		running: map[string]context.CancelFunc{}, synced: map[string]bool{},
		errors: prometheus.NewCounterVec(opts("event_watch_errors_total", "Failed lists or watches of the agents' Events, by cluster."), []string{"source"}),
		events: prometheus.NewCounterVec(opts("report_events_total", "Login failure Events seen, by cluster."), []string{"source"}),
	}
}

func (w *watcher) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.errors, w.events}
}

// set makes the running informers those of sources: new ones start,
// removed ones stop.
func (w *watcher) set(ctx context.Context, sources []source) {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := map[string]bool{}
	for _, s := range sources {
		want[s.name] = true
		if _, ok := w.running[s.name]; ok {
			continue
		}
		sctx, cancel := context.WithCancel(ctx)
		if err := w.start(sctx, s); err != nil {
			cancel()
			w.errors.WithLabelValues(s.name).Inc()
			w.log.Error("cannot watch the agents' Events", "source", s.name, "err", err)
			continue
		}
		w.running[s.name] = cancel
		w.log.Info("watching the agents' login failure Events", "source", s.name)
	}
	for name, cancel := range w.running {
		if !want[name] {
			cancel()
			delete(w.running, name)
			delete(w.synced, name)
			w.log.Info("stopped watching Events", "source", name)
		}
	}
}

// sources returns the watched sources and whether each has listed once.
func (w *watcher) status() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]bool{}
	for name := range w.running {
		out[name] = w.synced[name]
	}
	return out
}

func (w *watcher) start(ctx context.Context, s source) error {
	cs, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		return err
	}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "events", w.namespace,
		fields.OneTermEqualSelector("reason", authreport.Reason))
	inf := cache.NewSharedIndexInformer(lw, &corev1.Event{}, 0, cache.Indexers{})
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		w.errors.WithLabelValues(s.name).Inc()
		w.log.Warn("watch of the agents' Events failed; retrying", "source", s.name, "err", err)
	})
	handle := func(obj any) {
		ev, ok := obj.(*corev1.Event)
		if !ok {
			return
		}
		w.handle(s.name, ev)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
	}); err != nil {
		return err
	}
	go inf.Run(ctx.Done())
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			w.mu.Lock()
			if _, ok := w.running[s.name]; ok {
				w.synced[s.name] = true
			}
			w.mu.Unlock()
		}
	}()
	return nil
}

func (w *watcher) handle(src string, ev *corev1.Event) {
	account := ev.Annotations[authreport.AnnotationAccount]
	if ev.Reason != authreport.Reason || account == "" {
		return
	}
	last := ev.LastTimestamp.Time
	if last.IsZero() {
		last = ev.CreationTimestamp.Time
	}
	if time.Since(last) > w.maxAge {
		// Listed at the start of a watch, about a failure long past: the
		// start pass has checked every account anyway.
		return
	}
	w.events.WithLabelValues(src).Inc()
	w.report(account, fmt.Sprintf("%s/%s/%s", src, ev.Namespace, ev.Name))
}

// clusterGVR is Karmada's Cluster resource.
var clusterGVR = schema.GroupVersionResource{Group: "cluster.karmada.io", Version: "v1alpha1", Resource: "clusters"}

// proxyConfig returns a configuration that reaches a member cluster
// through Karmada's cluster proxy.
func proxyConfig(karmada *rest.Config, cluster string) *rest.Config {
	c := rest.CopyConfig(karmada)
	c.Host = karmada.Host + "/apis/cluster.karmada.io/v1alpha1/clusters/" + cluster + "/proxy"
	return c
}

// memberNames lists the clusters joined to Karmada.
func memberNames(ctx context.Context, karmada *rest.Config) ([]string, error) {
	dc, err := dynamic.NewForConfig(karmada)
	if err != nil {
		return nil, err
	}
	list, err := dc.Resource(clusterGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Karmada's clusters: %w", err)
	}
	var out []string
	for _, c := range list.Items {
		out = append(out, c.GetName())
	}
	sort.Strings(out)
	return out, nil
}
