package cluster

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/kube"
)

// syncCRs writes the MLSysOpsCluster CR and the MLSysOpsNode CRs of the
// nodes that changed. The CRDs come from the continuum agent (propagated by
// Karmada), so until they exist every write fails and is retried.
func (c *clusterLayer) syncCRs(ctx context.Context) {
	c.mu.Lock()
	clusterDirty := c.clusterDirty
	type job struct {
		desc   *mlsysopsv1.MLSysOpsNode
		online bool
		name   string
	}
	var jobs []job
	for name, r := range c.nodes {
		if r.dirty && r.desc != nil {
			jobs = append(jobs, job{r.desc.DeepCopy(), r.online, name})
		}
	}
	c.mu.Unlock()
	if !clusterDirty && len(jobs) == 0 {
		return
	}
	// The namespace is made once, not before every batch (a batch per
	// liveness change of a node: with 1,000 node agents, one create
	// refused as existing every second); a write finding it gone makes
	// it again.
	if !c.nsMade {
		if err := kube.EnsureNamespace(ctx, c.cs, mlsysopsv1.Namespace); err != nil {
			c.a.Log.Warn("namespace not ready; retrying", "namespace", mlsysopsv1.Namespace, "err", err)
			return
		}
		c.nsMade = true
	}
	if clusterDirty {
		if err := c.upsertCluster(ctx); err != nil {
			c.writeFailed("MLSysOpsCluster", c.a.Name, err)
		} else {
			c.mu.Lock()
			c.clusterDirty = false
			c.mu.Unlock()
			c.a.Log.Info("MLSysOpsCluster written", "namespace", mlsysopsv1.Namespace)
		}
	}
	for _, j := range jobs {
		if err := c.upsertNode(ctx, j.desc, j.online); err != nil {
			c.writeFailed("MLSysOpsNode", j.name, err)
			continue
		}
		c.mu.Lock()
		if r := c.nodes[j.name]; r != nil && r.online == j.online {
			r.dirty = false
		}
		c.mu.Unlock()
		c.a.Log.Info("MLSysOpsNode written", "node", j.name, "online", j.online)
	}
}

// writeFailed logs a failed CR write; one that found the namespace gone
// has the next batch make it again.
func (c *clusterLayer) writeFailed(kind, name string, err error) {
	if apierrors.IsNotFound(err) {
		c.nsMade = false
	}
	if meta.IsNoMatchError(err) {
		c.a.Log.Info("waiting for the MLSysOps CRDs (propagated by the continuum agent)", "kind", kind, "name", name)
		return
	}
	c.a.Log.Warn("CR write failed; retrying", "kind", kind, "name", name, "err", err)
}

func (c *clusterLayer) upsertNode(ctx context.Context, desc *mlsysopsv1.MLSysOpsNode, online bool) error {
	obj := &mlsysopsv1.MLSysOpsNode{ObjectMeta: metav1.ObjectMeta{Name: desc.Name, Namespace: mlsysopsv1.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c.kc, obj, func() error {
		obj.Spec = desc.Spec
		if obj.Labels == nil {
			obj.Labels = map[string]string{}
		}
		obj.Labels[mlsysopsv1.LabelCluster] = c.a.Name
		return nil
	}); err != nil {
		return err
	}
	before := obj.Status.DeepCopy()
	conds, phase := kube.AgentReady(online, obj.Generation)
	for _, cnd := range conds {
		meta.SetStatusCondition(&obj.Status.Conditions, cnd)
	}
	obj.Status.Phase, obj.Status.ObservedGeneration = phase, obj.Generation
	if equality.Semantic.DeepEqual(before, &obj.Status) {
		return nil // a node back online before its last offline was written
	}
	return c.kc.Status().Update(ctx, obj)
}

func (c *clusterLayer) upsertCluster(ctx context.Context) error {
	obj := &mlsysopsv1.MLSysOpsCluster{ObjectMeta: metav1.ObjectMeta{Name: c.desc.Name, Namespace: mlsysopsv1.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c.kc, obj, func() error {
		obj.Spec = c.desc.Spec
		return nil
	}); err != nil {
		return err
	}
	conds, phase := kube.AgentReady(true, obj.Generation)
	for _, cnd := range conds {
		meta.SetStatusCondition(&obj.Status.Conditions, cnd)
	}
	obj.Status.Phase, obj.Status.ObservedGeneration = phase, obj.Generation
	if err := c.kc.Status().Update(ctx, obj); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}
