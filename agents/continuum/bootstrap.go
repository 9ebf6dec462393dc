package continuum

import (
	"context"
	"fmt"
	"sort"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mlsysops-go/mlsysops/crds"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/kube"
)

// Names of the objects the continuum agent keeps in the Karmada API.
const (
	// CRDPropagationPolicy propagates the mlsysops.eu CRDs to every member
	// cluster, so that MLSysOpsApp objects can follow.
	CRDPropagationPolicy = "mlsysops-crds"
	// AppInterpreter tells Karmada how to read MLSysOpsApp status in the
	// members and what to keep of the member's copy.
	AppInterpreter = "mlsysops-app"
)

// EnsureAPI makes the Karmada API ready for MLSysOps: the mlsysops.eu CRDs
// (applied and established), their propagation to every member cluster,
// the application namespace, and the resource interpreter customization
// that reflects each member's MLSysOpsApp status into its ResourceBinding. It is
// idempotent and safe to call at every start.
func EnsureAPI(ctx context.Context, cfg *rest.Config) error {
	ext, err := apiextensionsclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kc, err := karmadaclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	list, err := kube.ReadCRDs(crds.FS, ".")
	if err != nil {
		return err
	}
	if err := kube.ApplyCRDs(ctx, ext, list); err != nil {
		return fmt.Errorf("karmada API: %w", err)
	}
	if err := kube.EnsureNamespace(ctx, cs, mlsysopsv1.Namespace); err != nil {
		return err
	}
	cpp, err := CRDPropagation()
	if err != nil {
		return err
	}
	cpps := kc.PolicyV1alpha1().ClusterPropagationPolicies()
	if cur, err := cpps.Get(ctx, cpp.Name, metav1.GetOptions{}); err == nil {
		cur.Spec = cpp.Spec
		_, err = cpps.Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update %s: %w", cpp.Name, err)
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	} else if _, err := cpps.Create(ctx, cpp, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s: %w", cpp.Name, err)
	}
	ric := AppInterpretation()
	rics := kc.ConfigV1alpha1().ResourceInterpreterCustomizations()
	if cur, err := rics.Get(ctx, ric.Name, metav1.GetOptions{}); err == nil {
		cur.Spec = ric.Spec
		if _, err := rics.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update %s: %w", ric.Name, err)
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	} else if _, err := rics.Create(ctx, ric, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s: %w", ric.Name, err)
	}
	return nil
}

// CheckAPI checks, without writing anything, that the MLSysOps API is
// installed in Karmada: every mlsysops.eu CRD of this version exists and is
// established. It is what the agent does when the deployer owns the API
// (--install-api=false), and needs only the right to read those CRDs.
func CheckAPI(ctx context.Context, cfg *rest.Config) error {
	ext, err := apiextensionsclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	list, err := kube.ReadCRDs(crds.FS, ".")
	if err != nil {
		return err
	}
	for _, want := range list {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("CRD %s: %w (install MLSysOps with `go run ./deployments`, or run the agent with --install-api)", want.Name, err)
		}
		if !kube.Established(crd) {
			return fmt.Errorf("CRD %s is not established yet", want.Name)
		}
	}
	return nil
}

// AwaitMembersAPI waits, for at most timeout, until every member cluster
// Karmada sees Ready lists the MLSysOpsApp API among its API enablements
// (Karmada's cluster status controller reports them every few seconds, so
// CRDs propagated a moment ago are not listed yet and placement would
// avoid every member). It returns the Ready members still without the
// API when timeout ends; placement avoids those and says why until
// Karmada reports it.
func AwaitMembersAPI(ctx context.Context, cfg *rest.Config, timeout time.Duration) ([]string, error) {
	kc, err := karmadaclientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var missing []string
	var listErr error
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := kc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
		if listErr = err; err != nil {
			return false, nil
		}
		missing = missing[:0]
		for i := range list.Items {
			c := &list.Items[i]
			if meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) && !HasAppAPI(c) {
				missing = append(missing, c.Name)
			}
		}
		return len(missing) == 0, nil
	})
	if err == nil {
		return nil, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if listErr != nil {
		return nil, fmt.Errorf("list Karmada clusters: %w", listErr)
	}
	sort.Strings(missing)
	return missing, nil
}

// CRDPropagation is the ClusterPropagationPolicy that carries the
// mlsysops.eu CRDs to every member cluster, including those joined later.
func CRDPropagation() (*policyv1alpha1.ClusterPropagationPolicy, error) {
	list, err := kube.ReadCRDs(crds.FS, ".")
	if err != nil {
		return nil, err
	}
	var selectors []policyv1alpha1.ResourceSelector
	for _, crd := range list {
		selectors = append(selectors, policyv1alpha1.ResourceSelector{
			APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: crd.Name,
		})
	}
	return &policyv1alpha1.ClusterPropagationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1alpha1.SchemeGroupVersion.String(), Kind: "ClusterPropagationPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: CRDPropagationPolicy},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors:  selectors,
			Placement:          policyv1alpha1.Placement{}, // every cluster, including those joined later
			ConflictResolution: policyv1alpha1.ConflictOverwrite,
		},
	}, nil
}

// AppInterpretation is the resource interpreter customization that tells
// Karmada how to read an MLSysOpsApp's status in the members and what to
// keep of the member's copy.
func AppInterpretation() *configv1alpha1.ResourceInterpreterCustomization {
	return &configv1alpha1.ResourceInterpreterCustomization{
		TypeMeta:   metav1.TypeMeta{APIVersion: configv1alpha1.GroupVersion.String(), Kind: "ResourceInterpreterCustomization"},
		ObjectMeta: metav1.ObjectMeta{Name: AppInterpreter},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: mlsysopsv1.SchemeGroupVersion.String(), Kind: "MLSysOpsApp"},
			Customizations: configv1alpha1.CustomizationRules{
				Retention:        &configv1alpha1.LocalValueRetention{LuaScript: retainLua},
				StatusReflection: &configv1alpha1.StatusReflection{LuaScript: reflectLua},
				// No StatusAggregation: Karmada's Lua bridge fails on some
				// application specs (it cannot turn empty Lua tables back
				// into lists under paths with "*"), so the continuum agent
				// aggregates the reflected statuses from the ResourceBinding
				// itself and is the only writer of the status.
			},
		},
	}
}

// The member's copy keeps the finalizer its cluster agent adds (removal
// must clean up before the object goes).
const retainLua = `function Retain(desiredObj, observedObj)
  if observedObj.metadata.finalizers ~= nil then
    desiredObj.metadata.finalizers = observedObj.metadata.finalizers
  end
  return desiredObj
end
`

// Karmada keeps each member's status as reported.
const reflectLua = `function ReflectStatus(observedObj)
  if observedObj.status == nil then
    return {}
  end
  return observedObj.status
end
`

// HasAppAPI reports whether Karmada has seen the MLSysOpsApp API in a
// member cluster; until then Karmada refuses to schedule applications there.
func HasAppAPI(c *clusterv1alpha1.Cluster) bool {
	for _, e := range c.Status.APIEnablements {
		if e.GroupVersion != mlsysopsv1.SchemeGroupVersion.String() {
			continue
		}
		for _, r := range e.Resources {
			if r.Kind == "MLSysOpsApp" {
				return true
			}
		}
	}
	return false
}
