package continuum

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/members"
)

// Scheme holds every kind the continuum agent reads or writes in Karmada.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, mlsysopsv1.AddToScheme, policyv1alpha1.Install, clusterv1alpha1.Install, workv1alpha1.Install, workv1alpha2.Install,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Controllers is the continuum agent's Karmada side: the API bootstrap and
// the placement controller, on one controller-runtime manager.
type Controllers struct {
	mgr ctrl.Manager
	// Apps is the placement controller; set Apps.Status to mirror status.
	Apps *AppReconciler
}

// ControllersOptions tune NewControllersWith.
type ControllersOptions struct {
	// Capacity tells placement what each member offers; nil reads the
	// members through Karmada's cluster proxy (NewProxyCapacity).
	Capacity CapacitySource
	// CheckAPIOnly checks the MLSysOps API in Karmada (CheckAPI) instead
	// of installing it (EnsureAPI): the deployer installed it, and the
	// agent runs with no right to write CRDs or cluster-wide policies.
	CheckAPIOnly bool
	// MembersAPIWait bounds how long the start waits for the Ready
	// members to report the MLSysOpsApp API (AwaitMembersAPI);
	// DefaultMembersAPIWait when zero.
	MembersAPIWait time.Duration
	// Reported, when set, holds the status reports of the cluster
	// agents: the controller uses them ahead of Karmada's reflection
	// and reconciles an application when its report comes.
	Reported *MemberStatuses
	// Works has the placement controller write each placed cluster's
	// Work itself instead of binding the application's ResourceBinding
	// (works.go); the applications' PropagationPolicy is removed.
	Works bool
}

// DefaultMembersAPIWait is how long the placement controllers wait at
// start for the members to report the MLSysOps API: a few of Karmada's
// cluster status periods.
const DefaultMembersAPIWait = time.Minute

// NewControllers ensures the MLSysOps API in Karmada and sets up the
// placement controller. Metrics are served by the agent, not here.
func NewControllers(ctx context.Context, cfg *rest.Config, capacity CapacitySource, log *slog.Logger) (*Controllers, error) {
	return NewControllersWith(ctx, cfg, log, ControllersOptions{Capacity: capacity})
}

// NewControllersWith is NewControllers with options. The manager's cache
// holds the application namespace only: every namespaced object the
// continuum agent reads (applications, their propagation policies and
// resource bindings) lives there, so its rights in Karmada can be a Role
// in that namespace plus read access to Cluster objects.
func NewControllersWith(ctx context.Context, cfg *rest.Config, log *slog.Logger, opts ControllersOptions) (*Controllers, error) {
	check := func(ctx context.Context, cfg *rest.Config) error { return EnsureAPIFor(ctx, cfg, opts.Works) }
	switch {
	case opts.CheckAPIOnly && opts.Works:
		check = CheckAPIForWorks
	case opts.CheckAPIOnly:
		check = CheckAPI
	}
	if err := check(ctx, cfg); err != nil {
		return nil, err
	}

	wait := opts.MembersAPIWait
	if wait == 0 {
		wait = DefaultMembersAPIWait
	}
	missing, err := AwaitMembersAPI(ctx, cfg, wait)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		log.Warn("member clusters have not got the MLSysOpsApp API yet; placement avoids them until Karmada reports it", "clusters", missing, "waited", wait)
	}
	capacity := opts.Capacity
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	// Applications the other propagation placed move to this one, their
	// copies in the members untouched (migrate.go).
	live, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	migrate := migrateWorks
	if opts.Works {
		migrate = migrateBindings
	}
	if err := migrate(ctx, live, log); err != nil {
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
		LeaderElection:         false,
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{mlsysopsv1.Namespace: {}},
			// The Works the continuum wrote, in every member's execution
			// namespace.
			ByObject: map[client.Object]cache.ByObject{&workv1alpha1.Work{}: {
				Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}, Label: workSelector(),
			}}},
	})
	if err != nil {
		return nil, fmt.Errorf("controller manager: %w", err)
	}
	if capacity == nil {
		if capacity, err = NewProxyCapacity(cfg); err != nil {
			return nil, err
		}
	}
	if pc, ok := capacity.(*ProxyCapacity); ok && pc.ListClusters == nil {
		// The controller watches Cluster objects: its cache has them.
		cached := mgr.GetClient()
		pc.ListClusters = func(ctx context.Context) ([]clusterv1alpha1.Cluster, error) {
			list := &clusterv1alpha1.ClusterList{}
			if err := cached.List(ctx, list); err != nil {
				return nil, err
			}
			return list.Items, nil
		}
	}
	apps := NewAppReconciler(mgr.GetClient(), capacity, log)
	apps.Live = mgr.GetAPIReader()
	memberApps, err := members.NewReader(cfg)
	if err != nil {
		return nil, err
	}
	apps.Orphans = &OrphanSweeper{Karmada: mgr.GetAPIReader(), Members: memberApps, Log: log}
	apps.Reported = opts.Reported
	apps.Works = opts.Works
	if err := apps.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if !opts.Works {
		if err := NewBindingScheduler(mgr.GetClient(), log).SetupWithManager(mgr); err != nil {
			return nil, err
		}
	}
	return &Controllers{mgr: mgr, Apps: apps}, nil
}

// Start runs the controllers until ctx ends.
func (c *Controllers) Start(ctx context.Context) error { return c.mgr.Start(ctx) }

// Client is the manager's client on the Karmada API (cached reads).
func (c *Controllers) Client() client.Client { return c.mgr.GetClient() }

// APIReader reads the Karmada API past the manager's cache.
func (c *Controllers) APIReader() client.Reader { return c.mgr.GetAPIReader() }

// workSelector selects the Works the continuum agent wrote.
func workSelector() labels.Selector {
	req, err := labels.NewRequirement(LabelWorkApp, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}
