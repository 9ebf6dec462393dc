package continuum

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// CapacitySource tells cluster placement what each member cluster offers.
type CapacitySource interface {
	Clusters(ctx context.Context) ([]placement.Cluster, error)
}

// ProxyCapacity reads member clusters through Karmada: Cluster objects for
// readiness and API availability, and each member's nodes from its cluster
// agent's latest capacity report (Reports) or, without a fresh one, its
// nodes and pods through Karmada's cluster proxy, so placement sees node
// labels (GPU products, layers, architectures) and what is already
// requested on each node.
//
// Reads are shared for a short while (TTL): placing a burst of applications
// then costs one read of every member, not one per application. The member
// clusters' own schedulers account resources exactly; the continuum only
// needs to pick a cluster that can host the application.
type ProxyCapacity struct {
	karmada karmadaclientset.Interface
	members *members.Reader
	// TTL is how long a read is reused; zero reads every time.
	TTL time.Duration
	// Reports, when set, holds the cluster agents' capacity reports, used
	// instead of reading the members while they are fresh.
	Reports *Reports
	// ListClusters, when set, lists Karmada's Cluster objects instead of
	// a read of the Karmada API: the placement controller's cache (every
	// pass of a burst needs them, and a read under the lock held every
	// TTL stalled every worker for as long as the loaded API took).
	ListClusters func(ctx context.Context) ([]clusterv1alpha1.Cluster, error)

	mu     sync.Mutex
	cached []placement.Cluster
	readAt time.Time
}

var _ CapacitySource = (*ProxyCapacity)(nil)

// NewProxyCapacity builds a ProxyCapacity on the Karmada API.
func NewProxyCapacity(cfg *rest.Config) (*ProxyCapacity, error) {
	kc, err := karmadaclientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mr, err := members.NewReader(cfg)
	if err != nil {
		return nil, err
	}
	return &ProxyCapacity{karmada: kc, members: mr, TTL: 2 * time.Second}, nil
}

// Clusters lists every member cluster with its nodes. A cluster that is
// not Ready, or where Karmada has not yet seen the MLSysOpsApp API, is
// returned not Ready; one whose nodes cannot be read, too.
func (p *ProxyCapacity) Clusters(ctx context.Context) ([]placement.Cluster, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cached != nil && time.Since(p.readAt) < p.TTL {
		return p.cached, nil
	}
	out, err := p.read(ctx)
	if err != nil {
		return nil, err
	}
	p.cached, p.readAt = out, time.Now()
	return out, nil
}

// Invalidate makes the next Clusters read the members again (a member
// became Ready or started serving the MLSysOps API).
func (p *ProxyCapacity) Invalidate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cached = nil
}

func (p *ProxyCapacity) read(ctx context.Context) ([]placement.Cluster, error) {
	items, err := p.clusters(ctx)
	if err != nil {
		return nil, fmt.Errorf("list Karmada clusters: %w", err)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	out := make([]placement.Cluster, 0, len(items))
	for i := range items {
		c := &items[i]
		pc := placement.Cluster{Name: c.Name, Ready: meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)}
		if pc.Ready && !HasAppAPI(c) {
			// Karmada reports a member's APIs every few seconds: the CRDs
			// propagated a moment ago are not listed yet.
			pc.Ready, pc.NotReady = false, "has not got the MLSysOpsApp API yet"
		}
		if c.Spec.Provider != "" {
			pc.CloudProvider = c.Spec.Provider
		}
		// The index's AsOf is when the report arrived (the continuum's
		// clock, not the cluster agent's) or when the read began.
		if idx, ok := p.Reports.index(c.Name); ok && pc.Ready {
			pc.Index = idx
		} else if pc.Ready {
			start := time.Now()
			nodes, err := p.members.Nodes(ctx, c.Name)
			if err != nil {
				pc.Ready = false
			} else {
				pc.Index = placement.NewIndexOf(nodes)
				pc.Index.SetAsOf(start)
			}
		}
		out = append(out, pc)
	}
	return out, nil
}

func (p *ProxyCapacity) clusters(ctx context.Context) ([]clusterv1alpha1.Cluster, error) {
	if p.ListClusters != nil {
		return p.ListClusters(ctx)
	}
	list, err := p.karmada.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}
