// Package continuum_test checks the continuum agent's use of Karmada
// against the testbed's real Karmada control plane and member clusters.
package continuum_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

var appGVR = mlsysopsv1.SchemeGroupVersion.WithResource("mlsysopsapps")

// EnsureAPI installs the CRDs in Karmada, Karmada propagates them to every
// member, an MLSysOpsApp is bound to the applications' policy for the
// continuum's scheduler, propagated to the member its binding names and
// shows there, and the member's status is reflected back into Karmada.
func TestEnsureAPIPropagatesAndReflectsStatus(t *testing.T) {
	env := testbed.Shared(t)
	ctx := context.Background()
	karmadaCfg := env.RESTConfig(t, testbed.ContextKarmada)
	if err := continuum.EnsureAPI(ctx, karmadaCfg); err != nil {
		t.Fatal(err)
	}
	// Twice: idempotent.
	if err := continuum.EnsureAPI(ctx, karmadaCfg); err != nil {
		t.Fatalf("second EnsureAPI: %v", err)
	}
	for _, cluster := range env.Clusters {
		ext := apiextensionsclientset.NewForConfigOrDie(env.RESTConfig(t, cluster))
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "mlsysopsapps.mlsysops.eu", metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("CRD not propagated to %s: %v", cluster, err)
		}
	}

	// Karmada schedules an app only to clusters whose API it has seen.
	kc := karmadaclientset.NewForConfigOrDie(karmadaCfg)
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := kc.ClusterV1alpha1().Clusters().Get(ctx, "cloud-1", metav1.GetOptions{})
		return err == nil && continuum.HasAppAPI(c), nil
	})
	if err != nil {
		t.Fatalf("Karmada never saw the MLSysOpsApp API in cloud-1: %v", err)
	}

	name := "status-" + rand.String(5)
	app := &mlsysopsv1.MLSysOpsApp{
		TypeMeta:   metav1.TypeMeta{APIVersion: mlsysopsv1.SchemeGroupVersion.String(), Kind: "MLSysOpsApp"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace},
		// cluster_id keeps any placement controller running beside this
		// test (other test packages share the testbed) on cloud-1 too.
		Spec: mlsysopsv1.MLSysOpsAppSpec{Name: name, ClusterPlacement: &mlsysopsv1.ClusterPlacement{ClusterID: []string{"cloud-1"}}, Components: []mlsysopsv1.Component{{
			Metadata: mlsysopsv1.ComponentMetadata{Name: "web"}, Containers: []mlsysopsv1.Container{{Image: "registry.example/web:1"}},
		}}},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(app)
	if err != nil {
		t.Fatal(err)
	}
	kdyn := dynamic.NewForConfigOrDie(karmadaCfg)
	if _, err := kdyn.Resource(appGVR).Namespace(mlsysopsv1.Namespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kdyn.Resource(appGVR).Namespace(mlsysopsv1.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// Karmada binds it to the applications' policy at once, for the
	// continuum's scheduler; the continuum's part (placing it on
	// cloud-1) is played here.
	var rb *workv1alpha2.ResourceBinding
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		rb, err = kc.WorkV1alpha2().ResourceBindings(mlsysopsv1.Namespace).Get(ctx, continuum.BindingName(name), metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("no ResourceBinding for the application: %v", err)
	}
	if rb.Annotations[policyv1alpha1.PropagationPolicyNameAnnotation] != continuum.AppPropagationPolicy || rb.Spec.SchedulerName != continuum.SchedulerName {
		t.Fatalf("binding of policy %q for scheduler %q, want %q and %q", rb.Annotations[policyv1alpha1.PropagationPolicyNameAnnotation],
			rb.Spec.SchedulerName, continuum.AppPropagationPolicy, continuum.SchedulerName)
	}
	patch := []byte(`{"metadata":{"annotations":{"` + mlsysopsv1.AnnotationPlacement + `":"cloud-1"}},"spec":{"clusters":[{"name":"cloud-1"}]}}`)
	if _, err := kc.WorkV1alpha2().ResourceBindings(mlsysopsv1.Namespace).Patch(ctx, rb.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	mdyn := dynamic.NewForConfigOrDie(env.RESTConfig(t, "cloud-1"))
	var member *unstructured.Unstructured
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		member, err = mdyn.Resource(appGVR).Namespace(mlsysopsv1.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("app not propagated to cloud-1: %v", err)
	}
	// The cluster agent's part, played here: report the component.
	member.Object["status"] = map[string]any{
		"phase":              "Running",
		"message":            "running on [cloud-1]",
		"observedGeneration": member.GetGeneration(),
		"components":         []any{map[string]any{"name": "web", "nodes": []any{"cloud-1"}, "replicas": int64(1), "readyReplicas": int64(1)}},
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Running", "message": "running",
			"lastTransitionTime": "2026-01-01T00:00:00Z"}},
	}
	if _, err := mdyn.Resource(appGVR).Namespace(mlsysopsv1.Namespace).UpdateStatus(ctx, member, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Karmada reflects the member's status into the ResourceBinding, where
	// the continuum agent reads it.
	var got []any
	var reflected map[string]any
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		rb, err := kc.WorkV1alpha2().ResourceBindings(mlsysopsv1.Namespace).Get(ctx, continuum.BindingName(name), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, item := range rb.Status.AggregatedStatus {
			if item.ClusterName != "cloud-1" || item.Status == nil {
				continue
			}
			var st map[string]any
			if err := json.Unmarshal(item.Status.Raw, &st); err != nil {
				return false, err
			}
			got, _, _ = unstructured.NestedSlice(st, "components")
			reflected = st
		}
		return len(got) == 1, nil
	})
	if err != nil {
		t.Fatalf("member status not reflected into the ResourceBinding: %v", err)
	}
	// A cluster agent of another test package may be running against the
	// same testbed and report the component too: only its name is certain.
	if c := got[0].(map[string]any); c["name"] != "web" {
		t.Errorf("reflected component = %v, want web", c)
	}
	// Only what the continuum reads, and the phase: the rest of a
	// member's status would ride in every write of the Work's and the
	// binding's status.
	for k := range reflected {
		if k != "phase" && k != "components" {
			t.Errorf("reflected status has %q (%v): want only phase and components", k, reflected)
		}
	}
	if reflected["phase"] == nil {
		t.Errorf("reflected status has no phase: %v", reflected)
	}
}

func metaName(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace}
}
