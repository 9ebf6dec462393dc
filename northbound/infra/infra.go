// Package infra is the northbound API's view of the Karmada control plane:
// MLSysOpsApp resources and their status, member clusters and the live
// state of their nodes (read through Karmada's cluster proxy), and the
// registration of node descriptions as MLSysOpsNode resources propagated
// to the node's cluster.
package infra

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/placement"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// ErrNotFound: no such application, cluster or node.
var ErrNotFound = errors.New("not found")

// ErrAPIMissing: the MLSysOps CRDs are not installed in Karmada (the
// continuum agent installs them when it starts).
var ErrAPIMissing = errors.New("the MLSysOps API (mlsysops.eu CRDs) is not installed in Karmada; start the continuum agent, which installs it")

// Karmada reads and writes the Karmada API.
type Karmada struct {
	c         client.Client
	members   *members.Reader
	namespace string
}

// Options tune a Karmada reader.
type Options struct {
	// Namespace holds MLSysOpsApp and MLSysOpsNode resources; default
	// mlsysopsv1.Namespace.
	Namespace string
}

// Scheme has every kind the northbound reads or writes in Karmada.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, mlsysopsv1.AddToScheme, policyv1alpha1.Install, clusterv1alpha1.Install,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// New returns a reader of the Karmada API at cfg.
func New(cfg *rest.Config, opts Options) (*Karmada, error) {
	if opts.Namespace == "" {
		opts.Namespace = mlsysopsv1.Namespace
	}
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("karmada client: %w", err)
	}
	mr, err := members.NewReader(cfg)
	if err != nil {
		return nil, err
	}
	return &Karmada{c: c, members: mr, namespace: opts.Namespace}, nil
}

// Namespace is where MLSysOpsApp and MLSysOpsNode resources live.
func (k *Karmada) Namespace() string { return k.namespace }

// Client is the underlying controller-runtime client.
func (k *Karmada) Client() client.Client { return k.c }

func wrapKube(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	case meta.IsNoMatchError(err):
		return fmt.Errorf("%s: %w", what, ErrAPIMissing)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// App returns the MLSysOpsApp name.
func (k *Karmada) App(ctx context.Context, name string) (*mlsysopsv1.MLSysOpsApp, error) {
	var app mlsysopsv1.MLSysOpsApp
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: k.namespace, Name: name}, &app); err != nil {
		return nil, wrapKube("MLSysOpsApp "+k.namespace+"/"+name, err)
	}
	return &app, nil
}

// ClusterState is a member cluster as Karmada sees it.
type ClusterState struct {
	Name    string
	Ready   bool
	Message string
	// Nodes are the cluster's nodes with what their pods request; nil
	// when the cluster is not Ready or its nodes could not be read.
	Nodes []placement.Node
	// NodesError says why Nodes is nil for a Ready cluster.
	NodesError error
}

// Clusters lists the member clusters, sorted by name, with their nodes.
func (k *Karmada) Clusters(ctx context.Context) ([]ClusterState, error) {
	var list clusterv1alpha1.ClusterList
	if err := k.c.List(ctx, &list); err != nil {
		return nil, wrapKube("list Karmada clusters", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	out := make([]ClusterState, len(list.Items))
	for i := range list.Items {
		out[i] = k.clusterState(ctx, &list.Items[i])
	}
	return out, nil
}

// Cluster returns one member cluster with its nodes.
func (k *Karmada) Cluster(ctx context.Context, name string) (ClusterState, error) {
	var c clusterv1alpha1.Cluster
	if err := k.c.Get(ctx, client.ObjectKey{Name: name}, &c); err != nil {
		return ClusterState{}, wrapKube("cluster "+name, err)
	}
	return k.clusterState(ctx, &c), nil
}

func (k *Karmada) clusterState(ctx context.Context, c *clusterv1alpha1.Cluster) ClusterState {
	cs := ClusterState{Name: c.Name}
	if cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady); cond != nil {
		cs.Ready = cond.Status == metav1.ConditionTrue
		if !cs.Ready {
			cs.Message = cond.Message
		}
	} else {
		cs.Message = "Karmada has not reported on this cluster yet"
	}
	if cs.Ready {
		cs.Nodes, cs.NodesError = k.ClusterNodes(ctx, c.Name)
	}
	return cs
}

// ClusterNodes reads a member cluster's nodes and the requests of its
// running pods through Karmada's cluster proxy.
func (k *Karmada) ClusterNodes(ctx context.Context, cluster string) ([]placement.Node, error) {
	return k.members.Nodes(ctx, cluster)
}

// AppPods lists the pods of an application in a member cluster.
func (k *Karmada) AppPods(ctx context.Context, cluster, app string) ([]corev1.Pod, error) {
	return k.members.AppPods(ctx, cluster, app)
}

// AppEvents lists the cluster agent's events about an application in a
// member cluster, oldest first.
func (k *Karmada) AppEvents(ctx context.Context, cluster, app string) ([]corev1.Event, error) {
	return k.members.AppEvents(ctx, cluster, app)
}

// AppServices lists the Services the cluster agent created for an
// application's components in a member cluster, sorted by name.
func (k *Karmada) AppServices(ctx context.Context, cluster, app string) ([]corev1.Service, error) {
	return k.members.AppServices(ctx, cluster, app)
}

// NodeResources is a node's allocatable and free capacity.
func NodeResources(n placement.Node) api.Resources {
	alloc := n.Node.Status.Allocatable
	req := n.Requested
	cpu := alloc.Cpu().MilliValue()
	mem := alloc.Memory().Value()
	r := api.Resources{
		CPU:    api.CPU{Allocatable: cpu, Free: max(0, cpu-quantity(req, corev1.ResourceCPU).MilliValue())},
		Memory: api.Memory{Allocatable: mem, Free: max(0, mem-quantity(req, corev1.ResourceMemory).Value())},
	}
	if q, ok := alloc[mlsysopsv1.ResourceGPU]; ok && q.Value() > 0 {
		model := n.Node.Labels[mlsysopsv1.LabelGPUProduct]
		if model == "" {
			model = "unknown"
		}
		g := api.GPUs{Allocatable: q.Value(), Free: max(0, q.Value()-quantity(req, mlsysopsv1.ResourceGPU).Value())}
		if m, err := strconv.ParseInt(n.Node.Labels[mlsysopsv1.LabelGPUMemory], 10, 64); err == nil {
			g.MemoryMiB = m
		}
		r.GPUs = map[string]api.GPUs{model: g}
	}
	return r
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) *resource.Quantity {
	q := l[name]
	return &q
}

// AddResources adds b to a.
func AddResources(a *api.Resources, b api.Resources) {
	a.CPU.Allocatable += b.CPU.Allocatable
	a.CPU.Free += b.CPU.Free
	a.Memory.Allocatable += b.Memory.Allocatable
	a.Memory.Free += b.Memory.Free
	for model, g := range b.GPUs {
		if a.GPUs == nil {
			a.GPUs = map[string]api.GPUs{}
		}
		cur := a.GPUs[model]
		cur.Allocatable += g.Allocatable
		cur.Free += g.Free
		if cur.MemoryMiB == 0 {
			cur.MemoryMiB = g.MemoryMiB
		}
		a.GPUs[model] = cur
	}
}

// NodeReady reports the Kubernetes node's Ready condition.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
