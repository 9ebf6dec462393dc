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
	// AppPropagationPolicy propagates every MLSysOpsApp (AppPropagation).
	AppPropagationPolicy = "mlsysops-apps"
	// AppInterpreter tells Karmada how to read MLSysOpsApp status in the
	// members and what to keep of the member's copy.
	AppInterpreter = "mlsysops-app"
)

// EnsureAPI makes the Karmada API ready for MLSysOps: the mlsysops.eu CRDs
// (applied and established), their propagation to every member cluster,
// the application namespace and its applications' propagation policy, and the resource interpreter customization
// that reflects each member's MLSysOpsApp status into its ResourceBinding. It is
// idempotent and safe to call at every start.
func EnsureAPI(ctx context.Context, cfg *rest.Config) error {
	return EnsureAPIFor(ctx, cfg, false)
}

// EnsureAPIFor is EnsureAPI for a continuum agent that writes the Works
// itself when works is set: then there must be no policy for the
// applications (Karmada's detector would bind them too), and one left by
// an earlier start is removed.
func EnsureAPIFor(ctx context.Context, cfg *rest.Config, works bool) error {
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
	err = upsert(ctx, cpp, cpps.Get, cpps.Create, func(cur *policyv1alpha1.ClusterPropagationPolicy) {
		cur.Spec = cpp.Spec
	}, cpps.Update)
	if err != nil {
		return err
	}
	pp := AppPropagation()
	pps := kc.PolicyV1alpha1().PropagationPolicies(pp.Namespace)
	if works {
		if err := removeAppPolicy(ctx, kc); err != nil {
			return err
		}
	} else if err := upsert(ctx, pp, pps.Get, pps.Create, func(cur *policyv1alpha1.PropagationPolicy) {
		// The scheduler name is immutable once written; ours from the start.
		cur.Spec.ResourceSelectors, cur.Spec.Placement, cur.Spec.ConflictResolution =
			pp.Spec.ResourceSelectors, pp.Spec.Placement, pp.Spec.ConflictResolution
	}, pps.Update); err != nil {
		return err
	}
	ric := AppInterpretation()
	rics := kc.ConfigV1alpha1().ResourceInterpreterCustomizations()
	return upsert(ctx, ric, rics.Get, rics.Create, func(cur *configv1alpha1.ResourceInterpreterCustomization) {
		cur.Spec = ric.Spec
	}, rics.Update)
}

// upsert creates want, or gives the object of its name the fields set
// copies from want.
func upsert[T metav1.Object](ctx context.Context, want T,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	set func(cur T),
	update func(context.Context, T, metav1.UpdateOptions) (T, error),
) error {
	cur, err := get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case err == nil:
		set(cur)
		if _, err := update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update %s: %w", want.GetName(), err)
		}
	case apierrors.IsNotFound(err):
		if _, err := create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s: %w", want.GetName(), err)
		}
	default:
		return fmt.Errorf("read %s: %w", want.GetName(), err)
	}
	return nil
}

// CheckAPI checks, without writing anything, that the MLSysOps API is
// installed in Karmada: every mlsysops.eu CRD of this version exists and is
// established, and the applications' propagation policy is there. It is what the agent does when the deployer owns the API
// (--install-api=false), and needs only the right to read those.
func CheckAPI(ctx context.Context, cfg *rest.Config) error {
	if err := CheckCRDs(ctx, cfg); err != nil {
		return err
	}
	kc, err := karmadaclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pp, err := kc.PolicyV1alpha1().PropagationPolicies(mlsysopsv1.Namespace).Get(ctx, AppPropagationPolicy, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("PropagationPolicy %s/%s: %w (install MLSysOps with `go run ./deployments`, or run the agent with --install-api)",
			mlsysopsv1.Namespace, AppPropagationPolicy, err)
	}
	if pp.Spec.SchedulerName != SchedulerName {
		return fmt.Errorf("PropagationPolicy %s/%s has scheduler %q, not %q: delete it and install MLSysOps again",
			mlsysopsv1.Namespace, AppPropagationPolicy, pp.Spec.SchedulerName, SchedulerName)
	}
	return nil
}

// CheckAPIForWorks is CheckAPI for a continuum agent that writes the
// Works itself: the CRDs are checked, and the applications' policy, which
// an earlier install with the binding propagation left, is removed
// (Karmada's detector would bind the applications beside the Works).
func CheckAPIForWorks(ctx context.Context, cfg *rest.Config) error {
	if err := CheckCRDs(ctx, cfg); err != nil {
		return err
	}
	kc, err := karmadaclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return removeAppPolicy(ctx, kc)
}

func removeAppPolicy(ctx context.Context, kc karmadaclientset.Interface) error {
	err := kc.PolicyV1alpha1().PropagationPolicies(mlsysopsv1.Namespace).Delete(ctx, AppPropagationPolicy, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove PropagationPolicy %s/%s: %w", mlsysopsv1.Namespace, AppPropagationPolicy, err)
	}
	return nil
}

// CheckCRDs checks that the MLSysOps CRDs are installed and established
// in Karmada.
func CheckCRDs(ctx context.Context, cfg *rest.Config) error {
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

// AppPropagation is the PropagationPolicy of every MLSysOpsApp: Karmada's
// detector binds an application to it as soon as it sees it, and the
// continuum agent, the policy's scheduler (SchedulerName), sets the
// binding's clusters to those it placed the application on
// (AnnotationPlacement on the binding). Its placement names no cluster:
// the continuum's decisions are per application, on the bindings.
//
// One policy, there before any application, rather than one per
// application written once it is placed: Karmada's detector took an
// application without a policy five times (a pass that finds no policy
// and fails by design, its retry, the policy's arrival, the claim's
// update meeting a binding its cache did not show yet, that failure's
// retry) against twice for an object whose policy was there first.
func AppPropagation() *policyv1alpha1.PropagationPolicy {
	return &policyv1alpha1.PropagationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1alpha1.SchemeGroupVersion.String(), Kind: "PropagationPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: AppPropagationPolicy, Namespace: mlsysopsv1.Namespace},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors:  []policyv1alpha1.ResourceSelector{{APIVersion: mlsysopsv1.SchemeGroupVersion.String(), Kind: "MLSysOpsApp"}},
			Placement:          policyv1alpha1.Placement{},
			ConflictResolution: policyv1alpha1.ConflictOverwrite,
			SchedulerName:      SchedulerName,
		},
	}
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

// Karmada keeps of each member's status what the continuum agent reads
// (the components, see AppReconciler.memberComponents) and the phase (for
// a person reading the binding). The rest (message, conditions, observed
// generation) is for whoever reads the member's copy: reflected, every
// write of the Work's status and of the binding's aggregated status in
// Karmada carried it, and every watch event of them.
const reflectLua = `function ReflectStatus(observedObj)
  if observedObj.status == nil then
    return {}
  end
  return {phase = observedObj.status.phase, components = observedObj.status.components}
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
