package infra

import (
	"context"
	"errors"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/resources"
)

// nodePolicyPrefix starts the name of the PropagationPolicy that carries a
// cluster's node descriptions to it.
const nodePolicyPrefix = "mlsysops-nodes-"

// NodeDescriptions lists the registered node descriptions.
func (k *Karmada) NodeDescriptions(ctx context.Context) ([]mlsysopsv1.MLSysOpsNode, error) {
	var list mlsysopsv1.MLSysOpsNodeList
	if err := k.c.List(ctx, &list, client.InNamespace(k.namespace)); err != nil {
		return nil, wrapKube("list MLSysOpsNode descriptions", err)
	}
	return list.Items, nil
}

// NodeDescription returns one registered node description.
func (k *Karmada) NodeDescription(ctx context.Context, name string) (*mlsysopsv1.MLSysOpsNode, error) {
	var n mlsysopsv1.MLSysOpsNode
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: k.namespace, Name: name}, &n); err != nil {
		return nil, wrapKube("MLSysOpsNode "+name, err)
	}
	return &n, nil
}

// ClusterExists reports whether a member cluster of that name is joined.
func (k *Karmada) ClusterExists(ctx context.Context, name string) (bool, error) {
	_, err := k.Cluster(ctx, name)
	if err == nil {
		return true, nil
	}
	if isNotFound(err) {
		return false, nil
	}
	return false, err
}

// RegisterNode creates or replaces a node description in Karmada, labelled
// with its cluster, and makes sure the cluster's PropagationPolicy carries
// it to that cluster, where the cluster agent reads it. It reports whether
// the description is new.
func (k *Karmada) RegisterNode(ctx context.Context, node *mlsysopsv1.MLSysOpsNode) (bool, error) {
	cluster := node.Spec.ClusterID
	if err := k.ensureNodePolicy(ctx, cluster); err != nil {
		return false, err
	}
	obj := &mlsysopsv1.MLSysOpsNode{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: k.namespace, Name: node.Name,
			Labels: map[string]string{mlsysopsv1.LabelCluster: resources.SanitizeLabelValue(cluster)},
		},
		Spec: node.Spec,
	}
	var cur mlsysopsv1.MLSysOpsNode
	err := k.c.Get(ctx, client.ObjectKeyFromObject(obj), &cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := k.c.Create(ctx, obj); err != nil {
			return false, wrapKube("create MLSysOpsNode "+node.Name, err)
		}
		return true, nil
	case err != nil:
		return false, wrapKube("MLSysOpsNode "+node.Name, err)
	}
	if cur.Labels == nil {
		cur.Labels = map[string]string{}
	}
	cur.Labels[mlsysopsv1.LabelCluster] = obj.Labels[mlsysopsv1.LabelCluster]
	cur.Spec = node.Spec
	if err := k.c.Update(ctx, &cur); err != nil {
		return false, wrapKube("update MLSysOpsNode "+node.Name, err)
	}
	return false, nil
}

// UnregisterNode deletes a node description; Karmada removes it from the
// cluster.
func (k *Karmada) UnregisterNode(ctx context.Context, name string) error {
	obj := &mlsysopsv1.MLSysOpsNode{ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: name}}
	return wrapKube("delete MLSysOpsNode "+name, k.c.Delete(ctx, obj))
}

func (k *Karmada) ensureNodePolicy(ctx context.Context, cluster string) error {
	want := policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{
			APIVersion: mlsysopsv1.SchemeGroupVersion.String(), Kind: mlsysopsv1.KindNode,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				mlsysopsv1.LabelCluster: resources.SanitizeLabelValue(cluster),
			}},
		}},
		Placement: policyv1alpha1.Placement{
			ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{cluster}},
		},
		ConflictResolution: policyv1alpha1.ConflictOverwrite,
	}
	pp := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: nodePolicyPrefix + resources.SanitizeLabelValue(cluster)},
		Spec:       want,
	}
	var cur policyv1alpha1.PropagationPolicy
	err := k.c.Get(ctx, client.ObjectKeyFromObject(pp), &cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := k.c.Create(ctx, pp); err != nil && !apierrors.IsAlreadyExists(err) {
			return wrapKube("create PropagationPolicy "+pp.Name, err)
		}
		return nil
	case err != nil:
		return wrapKube("PropagationPolicy "+pp.Name, err)
	}
	cur.Spec.ResourceSelectors = want.ResourceSelectors
	cur.Spec.Placement = want.Placement
	cur.Spec.ConflictResolution = want.ConflictResolution
	if err := k.c.Update(ctx, &cur); err != nil {
		return wrapKube("update PropagationPolicy "+pp.Name, err)
	}
	return nil
}

func isNotFound(err error) bool {
	return err != nil && (apierrors.IsNotFound(err) || errors.Is(err, ErrNotFound))
}
