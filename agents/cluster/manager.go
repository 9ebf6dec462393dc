package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// Scheme holds every kind the cluster agent reads or writes.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := mlsysopsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Controllers is the cluster agent's Kubernetes side on one
// controller-runtime manager.
type Controllers struct {
	mgr     ctrl.Manager
	Apps    *AppReconciler
	Targets *TargetsReconciler
}

// NewControllers sets up the application and scrape-target controllers for
// the member cluster named cluster. Metrics are served by the agent, not
// here.
func NewControllers(ctx context.Context, cfg *rest.Config, cluster string, log *slog.Logger) (*Controllers, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	// controller-runtime wants a global logger too; the manager's own one
	// carries this agent's keys.
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 logr.FromSlogHandler(log.Handler()),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The MLSysOps objects the agent reads live in one namespace: its
		// rights on them can be a Role there. Deployments, Services and
		// pods are in each application's own namespace, nodes are
		// cluster-scoped: those are cached cluster-wide.
		// Nothing here reads managed fields; a cluster of a thousand
		// nodes and their pods holds them twice over otherwise.
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&mlsysopsv1.MLSysOpsApp{}:  {Namespaces: map[string]cache.Config{mlsysopsv1.Namespace: {}}},
				&mlsysopsv1.MLSysOpsNode{}: {Namespaces: map[string]cache.Config{mlsysopsv1.Namespace: {}}},
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("controller manager for %s: %w", cluster, err)
	}
	apps := NewAppReconciler(mgr.GetClient(), cluster, log)
	apps.Live = mgr.GetAPIReader()
	// Application namespaces whose application is gone are swept.
	sweeper := &NamespaceSweeper{Live: mgr.GetAPIReader(), Writer: mgr.GetClient(), Log: log}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		sweeper.Run(ctx, 0)
		return nil
	})); err != nil {
		return nil, err
	}
	// The placement index follows the manager's own informers: no watch
	// beyond those the controller reads anyway.
	informer := func(obj client.Object) (handlerAdder, error) {
		return mgr.GetCache().GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
	}
	nodes, err := informer(&corev1.Node{})
	if err != nil {
		return nil, fmt.Errorf("placement index of %s: %w", cluster, err)
	}
	pods, err := informer(&corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("placement index of %s: %w", cluster, err)
	}
	if err := apps.feed.feed(nodes, pods, nil); err != nil {
		return nil, fmt.Errorf("placement index of %s: %w", cluster, err)
	}
	// Node descriptions add CPU frequencies and container runtimes; their
	// API may come later than the controller (the cluster agent installs
	// it), so they are followed once it exists.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			descs, err := informer(&mlsysopsv1.MLSysOpsNode{})
			if err == nil {
				if err := apps.feed.feedDescriptions(descs); err != nil {
					log.Warn("placement without node descriptions", "err", err)
				}
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(10 * time.Second):
			}
		}
	})); err != nil {
		return nil, err
	}
	if err := apps.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	targets := NewTargetsReconciler(mgr.GetClient(), log)
	if err := targets.SetupWithManager(ctx, mgr); err != nil {
		return nil, err
	}
	return &Controllers{mgr: mgr, Apps: apps, Targets: targets}, nil
}

// Reader reads from the controllers' informer caches (applications and
// node descriptions in the application namespace, Deployments, nodes and
// pods): no API request.
func (c *Controllers) Reader() client.Reader { return c.mgr.GetClient() }

// Start runs the controllers until ctx ends.
func (c *Controllers) Start(ctx context.Context) error { return c.mgr.Start(ctx) }
