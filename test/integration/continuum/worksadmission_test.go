package continuum_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	"github.com/mlsysops-go/mlsysops/deployments/charts"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// TestWorksAdmissionPolicy installs, in the real Karmada API, what the
// mlsysops-karmada chart renders for propagation work (the ClusterRole
// that lets the continuum agent write Works anywhere, and the admission
// policy that holds it to its applications' Works) and acts as the
// continuum agent (impersonation, server-side dry runs): the Work of an
// application is accepted; a Work carrying anything else, one outside an
// execution namespace, one not named after its application and the
// deletion of a Work that is not an application's are refused, with the
// policy's message.
func TestWorksAdmissionPolicy(t *testing.T) {
	env := testbed.Shared(t)
	ctx := context.Background()
	cfg := env.RESTConfig(t, testbed.ContextKarmada)
	objs, err := charts.Render(charts.Karmada, map[string]any{
		"clusters": map[string]any{"cloud-1": []any{"cloud-1"}}, "redis": map[string]any{"address": "192.0.2.1:6379"},
		"xmpp": map[string]any{"server": "192.0.2.1:5222"}, "propagation": "work",
	})
	if err != nil {
		t.Fatal(err)
	}
	admin := dynamic.NewForConfigOrDie(cfg)
	gvrs := map[string]schema.GroupVersionResource{
		"ClusterRole":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		"ClusterRoleBinding":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
		"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
	}
	installed := 0
	for _, o := range objs {
		gvr, ok := gvrs[o.GetKind()]
		if !ok || o.GetName() != "mlsysops-continuum-agent-works" {
			continue
		}
		o.SetResourceVersion("")
		if _, err := admin.Resource(gvr).Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "works-admission-test", Force: true}); err != nil {
			t.Fatalf("apply %s: %v", o.GetKind(), err)
		}
		installed++
		t.Cleanup(func() { _ = admin.Resource(gvr).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}) })
	}
	if installed != len(gvrs) {
		t.Fatalf("%d of the %d objects of propagation work rendered", installed, len(gvrs))
	}

	as := rest.CopyConfig(cfg)
	as.Impersonate.UserName = "system:serviceaccount:mlsysops-framework:mlsysops-continuum-agent"
	as.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:mlsysops-framework", "system:authenticated"}
	scheme, _ := continuum.Scheme()
	agent, err := client.New(as, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	work := func(ns, name, app string, manifest map[string]any) *workv1alpha1.Work {
		raw, err := json.Marshal(manifest)
		if err != nil {
			t.Fatal(err)
		}
		return &workv1alpha1.Work{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{continuum.LabelWorkApp: app}},
			Spec:       workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}}},
		}
	}
	appCopy := func(name string) map[string]any {
		return map[string]any{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsApp", "metadata": map[string]any{"name": name, "namespace": "mlsysops"}, "spec": map[string]any{}}
	}
	es := "karmada-es-cloud-1"
	dry := client.DryRunAll
	// The policy takes a moment to be loaded: until then anything passes.
	testbed.Eventually(t, "the admission policy refuses a Deployment", time.Minute, func() error {
		deploy := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "x", "namespace": "default"}}
		err := agent.Create(ctx, work(es, "x-mlsysopsapp", "x", deploy), dry)
		if err == nil || !strings.Contains(err.Error(), "may only write the Works of its applications") {
			return fmt.Errorf("create a Work of a Deployment: %v", err)
		}
		return nil
	})
	if err := agent.Create(ctx, work(es, continuum.WorkName("a1"), "a1", appCopy("a1")), dry); err != nil {
		t.Errorf("the Work of application a1 refused: %v", err)
	}
	for name, w := range map[string]*workv1alpha1.Work{
		"outside an execution namespace":  work("default", "a1-mlsysopsapp", "a1", appCopy("a1")),
		"not named after its application": work(es, "other-mlsysopsapp", "a1", appCopy("a1")),
		"carrying another application":    work(es, "a1-mlsysopsapp", "a1", appCopy("a2")),
	} {
		if err := agent.Create(ctx, w, dry); err == nil || !strings.Contains(err.Error(), "may only write the Works of its applications") {
			t.Errorf("a Work %s: %v, want refused by the policy", name, err)
		}
	}
	// A Work of Karmada's own, which the agent may not delete.
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
		"metadata": map[string]any{"name": "works-admission-test", "namespace": es},
		"spec":     map[string]any{"workload": map[string]any{"manifests": []any{}}},
	}}
	worksGVR := schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha1", Resource: "works"}
	if _, err := admin.Resource(worksGVR).Namespace(es).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.Resource(worksGVR).Namespace(es).Delete(context.Background(), other.GetName(), metav1.DeleteOptions{})
	})
	if err := agent.Delete(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: es, Name: other.GetName()}}, dry); err == nil ||
		!strings.Contains(err.Error(), "may only write the Works of its applications") {
		t.Errorf("delete a Work not of an application: %v, want refused by the policy", err)
	}
}
