// Package election gives the agents of the continuum and cluster layers
// leader election (--leader-elect): a Kubernetes Lease, held through
// client-go's leaderelection, in the layer's own API (Karmada's for the
// continuum, the member cluster's for a cluster agent). The full build
// imports it; the node-only build runs without replicas and leaves it,
// and client-go, out.
package election

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/kube"
)

func init() { agent.RegisterCampaign(New) }

// DefaultLease is the Lease of an agent without --leader-elect-lease.
func DefaultLease(layer agentconfig.Layer, name string) string {
	return mlsysopsv1.Namespace + "/mlsysops-" + string(layer) + "-" + name
}

// Campaign competes for one agent's Lease (agent.Campaign).
type Campaign struct {
	conn      *agent.Connection
	log       *slog.Logger
	cs        kubernetes.Interface
	cfg       *rest.Config
	lock      *trackingLock
	namespace string
	name      string
	identity  string
	onLeader  func(string)
	leader    atomic.Value // string
}

// New builds the campaign of replica identity of the agent (layer, name),
// with the Lease in the API the connection names for the layer.
func New(conn *agent.Connection, layer agentconfig.Layer, name, identity string, log *slog.Logger, onLeader func(string)) (agent.Campaign, error) {
	lease := conn.LeaderElectLease
	if lease == "" {
		lease = DefaultLease(layer, name)
	}
	ns, ln, ok := strings.Cut(lease, "/")
	if !ok {
		return nil, fmt.Errorf("lease %q: want namespace/name", lease)
	}
	kubeconfig, kctx := conn.LeaderElectKubeconfig, conn.LeaderElectContext
	if kubeconfig == "" && kctx == "" {
		switch layer {
		case agentconfig.LayerContinuum:
			kubeconfig, kctx = conn.KarmadaKubeconfig, conn.KarmadaContext
		case agentconfig.LayerCluster:
			kubeconfig, kctx = conn.Kubeconfig, conn.KubeContext
		default:
			return nil, fmt.Errorf("the %s layer runs without replicas", layer)
		}
	}
	cfg, err := kube.RESTConfig(kubeconfig, kctx)
	if err != nil {
		return nil, fmt.Errorf("lease API: %w", err)
	}
	// Renewals must not wait behind the agent's own bursts: a client of
	// their own, with a timeout below the renew deadline.
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = conn.RenewDeadline / 2
	cfg.UserAgent = "mlsysops-agent-election/" + identity
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("lease API: %w", err)
	}
	c := &Campaign{conn: conn, log: log, cs: cs, cfg: cfg, namespace: ns, name: ln, identity: identity, onLeader: onLeader}
	c.leader.Store("")
	c.lock = &trackingLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: ln},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}}
	return c, nil
}

// Lease names the Lease.
func (c *Campaign) Lease() string { return c.namespace + "/" + c.name }

// Leader is the holder last observed.
func (c *Campaign) Leader() string { return c.leader.Load().(string) }

// Ready asks the Lease's API server whether it is ready.
func (c *Campaign) Ready(ctx context.Context) error { return kube.Readyz(ctx, c.cfg, "lease API") }

// Run competes for the Lease until ctx ends. Each term runs lead with a
// context that ends when the Lease is lost; the Lease is released only
// after lead has returned, so the next leader starts after this one's
// agent stopped (on SIGTERM, or when its agent failed). A leader that
// cannot renew stops its agent within the renew deadline, before the
// lease duration lets a follower take over.
func (c *Campaign) Run(ctx context.Context, lead func(ctx context.Context)) error {
	c.ensureNamespace(ctx)
	for ctx.Err() == nil {
		ectx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		c.lock.held.Store(false)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          c.lock,
			LeaseDuration: c.conn.LeaseDuration,
			RenewDeadline: c.conn.RenewDeadline,
			RetryPeriod:   c.conn.RetryPeriod,
			Name:          c.Lease(),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					defer close(done)
					defer cancel() // a lead that returns gives the term up
					if lctx.Err() == nil {
						lead(lctx)
					}
				},
				OnStoppedLeading: func() {},
				OnNewLeader: func(identity string) {
					c.leader.Store(identity)
					c.onLeader(identity)
				},
			},
		})
		if err != nil {
			cancel()
			return err
		}
		le.Run(ectx)
		cancel()
		// acquire succeeded at least once: OnStartedLeading runs (or will).
		if c.lock.held.Load() {
			<-done
			c.release()
		}
		select {
		case <-ctx.Done():
		case <-time.After(c.conn.RetryPeriod):
		}
	}
	return nil
}

// release gives the Lease up when this replica still holds it, so that a
// follower takes it at its next try instead of after the lease duration.
func (c *Campaign) release() {
	ctx, cancel := context.WithTimeout(context.Background(), c.conn.RenewDeadline)
	defer cancel()
	rec, _, err := c.lock.Get(ctx)
	if err != nil {
		c.log.Warn("releasing the lease", "err", err)
		return
	}
	if rec.HolderIdentity != c.identity {
		return
	}
	now := metav1.NewTime(time.Now())
	if err := c.lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
	}); err != nil {
		c.log.Warn("releasing the lease", "err", err)
		return
	}
	c.log.Info("lease released", "lease", c.Lease())
}

// ensureNamespace creates the Lease's namespace when it is missing and
// this replica may; otherwise the election reports the missing namespace.
func (c *Campaign) ensureNamespace(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		c.log.Warn("lease namespace", "namespace", c.namespace, "err", err)
	}
}

// trackingLock is the Lease lock that records whether this replica wrote
// itself as the holder: then the elector has started (or will start) its
// leading callback.
type trackingLock struct {
	resourcelock.Interface
	held atomic.Bool
}

func (l *trackingLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, rec)
	if err == nil && rec.HolderIdentity == l.Identity() {
		l.held.Store(true)
	}
	return err
}

func (l *trackingLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, rec)
	if err == nil && rec.HolderIdentity == l.Identity() {
		l.held.Store(true)
	}
	return err
}
