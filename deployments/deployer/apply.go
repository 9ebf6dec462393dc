package deployer

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/mlsysops-go/mlsysops/deployments/charts"
)

var clusterGK = schema.GroupKind{Group: "cluster.karmada.io", Kind: "Cluster"}

// Outcome is what applying one object did.
type Outcome string

// Outcomes of Apply.
const (
	Created   Outcome = "created"
	Changed   Outcome = "changed"
	Unchanged Outcome = "unchanged"
	// Deleted is an object of the installation the install no longer
	// renders (Deployer.prune).
	Deleted Outcome = "deleted"
)

// Result is the outcome of applying one object.
type Result struct {
	Cluster   string
	Kind      string
	Namespace string
	Name      string
	Outcome   Outcome
}

// Ref names the object for messages: kind namespace/name in cluster.
func (r Result) Ref() string { return ref(r.Cluster, r.Kind, r.Namespace, r.Name) }

func ref(cluster, kind, ns, name string) string {
	if ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%s %s (%s)", kind, name, cluster)
}

// resource returns the dynamic client of an object's kind in c.
func (c *Cluster) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, *meta.RESTMapping, error) {
	gvk := o.GroupVersionKind()
	m, err := c.mapping(gvk)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: the %s API has no %s: %w", ref(c.Name, o.GetKind(), o.GetNamespace(), o.GetName()), c.Name, gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.Dyn.Resource(m.Resource).Namespace(o.GetNamespace()), m, nil
	}
	return c.Dyn.Resource(m.Resource), m, nil
}

// Apply writes an object with server-side apply as FieldManager, taking
// over fields another manager set (the deployer's is the desired state),
// and says whether it was created, changed or already as desired. With
// dryRun nothing is stored; the apiserver still validates and admits it.
func (c *Cluster) Apply(ctx context.Context, o *unstructured.Unstructured, dryRun bool) (Result, error) {
	res := Result{Cluster: c.Name, Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
	ri, _, err := c.resource(o)
	if err != nil {
		return res, err
	}
	before, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		before = nil
	case err != nil:
		return res, fmt.Errorf("read %s: %w", res.Ref(), err)
	}
	body, err := json.Marshal(o.Object)
	if err != nil {
		return res, fmt.Errorf("encode %s: %w", res.Ref(), err)
	}
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: ptr(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	after, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, opts)
	if err != nil {
		return res, fmt.Errorf("apply %s: %w", res.Ref(), err)
	}
	switch {
	case before == nil:
		res.Outcome = Created
	case before.GetResourceVersion() != after.GetResourceVersion():
		res.Outcome = Changed
	default:
		res.Outcome = Unchanged
	}
	return res, nil
}

// Delete deletes an object (in the background: owned objects follow) and
// reports whether it existed.
func (c *Cluster) Delete(ctx context.Context, o *unstructured.Unstructured, dryRun bool) (bool, error) {
	ri, _, err := c.resource(o)
	if err != nil {
		if meta.IsNoMatchError(err) || strings.Contains(err.Error(), "no matches for kind") {
			return false, nil
		}
		return false, err
	}
	policy := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &policy}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	err = ri.Delete(ctx, o.GetName(), opts)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete %s: %w", ref(c.Name, o.GetKind(), o.GetNamespace(), o.GetName()), err)
	}
	return true, nil
}

// Exists reports whether an object is still there.
func (c *Cluster) Exists(ctx context.Context, o *unstructured.Unstructured) (bool, error) {
	ri, _, err := c.resource(o)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, err
	}
	_, err = ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// ownedKinds are the kinds the charts and the deployer create, which
// uninstall and status look for by label.
var ownedKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Namespace"},
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
	{Group: "policy.karmada.io", Version: "v1alpha1", Kind: "PropagationPolicy"},
	{Group: "policy.karmada.io", Version: "v1alpha1", Kind: "ClusterPropagationPolicy"},
	{Group: "policy.karmada.io", Version: "v1alpha1", Kind: "OverridePolicy"},
	{Group: "config.karmada.io", Version: "v1alpha1", Kind: "ResourceInterpreterCustomization"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"},
}

// Owned lists every object of the installation in c: the kinds above
// labelled part-of=mlsysops and instance=<release>. Kinds the API does not
// serve are skipped.
func (c *Cluster) Owned(ctx context.Context) ([]*unstructured.Unstructured, error) {
	sel := charts.LabelPartOf + "=" + charts.PartOfValue + "," + charts.LabelInstance + "=" + charts.Release
	var out []*unstructured.Unstructured
	for _, gvk := range ownedKinds {
		m, err := c.mapping(gvk)
		if err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return nil, err
		}
		list, err := c.Dyn.Resource(m.Resource).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("list %s in the %s API: %w", m.Resource.Resource, c.Name, err)
		}
		for i := range list.Items {
			u := list.Items[i]
			u.SetAPIVersion(gvk.GroupVersion().String())
			u.SetKind(gvk.Kind)
			out = append(out, &u)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return charts.StageIndex(out[i]) < charts.StageIndex(out[j]) })
	return out, nil
}

func ptr[T any](v T) *T { return &v }
