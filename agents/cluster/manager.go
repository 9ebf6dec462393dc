package cluster

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	mgr  ctrl.Manager
	Apps *AppReconciler
}

// NewControllers sets up the application controller for the member cluster
// named cluster. Metrics are served by the agent, not here.
func NewControllers(cfg *rest.Config, cluster string, log *slog.Logger) (*Controllers, error) {
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
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&mlsysopsv1.MLSysOpsApp{}:  {Namespaces: map[string]cache.Config{mlsysopsv1.Namespace: {}}},
			&mlsysopsv1.MLSysOpsNode{}: {Namespaces: map[string]cache.Config{mlsysopsv1.Namespace: {}}},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("controller manager for %s: %w", cluster, err)
	}
	apps := NewAppReconciler(mgr.GetClient(), cluster, log)
	if err := apps.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return &Controllers{mgr: mgr, Apps: apps}, nil
}

// Start runs the controllers until ctx ends.
func (c *Controllers) Start(ctx context.Context) error { return c.mgr.Start(ctx) }
