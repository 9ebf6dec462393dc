// Package crds_test installs the generated CRDs (crds/) into the testbed's
// Karmada API server and creates every example description and
// application through it, with strict field validation: what the loader
// accepts, the real apiserver accepts unchanged, and what it rejects the
// apiserver rejects too.
package crds_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/crds"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

var plurals = map[string]string{
	mlsysopsv1.KindApp:        mlsysopsv1.ResourceApps,
	mlsysopsv1.KindNode:       mlsysopsv1.ResourceNodes,
	mlsysopsv1.KindCluster:    mlsysopsv1.ResourceClusters,
	mlsysopsv1.KindContinuum:  mlsysopsv1.ResourceContinuums,
	mlsysopsv1.KindDatacenter: mlsysopsv1.ResourceDatacenters,
}

func gvr(kind string) schema.GroupVersionResource {
	return mlsysopsv1.SchemeGroupVersion.WithResource(plurals[kind])
}

// strict makes the apiserver fail on unknown fields instead of dropping
// them, so a field the Go types have and the CRD lacks is caught.
var strict = metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}

// setup installs the CRDs and returns a dynamic client and a fresh
// namespace, deleted at the end of the test.
func setup(t *testing.T) (context.Context, dynamic.Interface, string) {
	t.Helper()
	env := testbed.Shared(t)
	cfg := env.RESTConfig(t, testbed.ContextKarmada)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)

	installCRDs(ctx, t, apiextensionsclientset.NewForConfigOrDie(cfg))

	kube := kubernetes.NewForConfigOrDie(cfg)
	ns := "crds-test-" + rand.String(6)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		// A fresh context: the test's may be done.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete namespace %s: %v", ns, err)
		}
	})
	return ctx, dynamic.NewForConfigOrDie(cfg), ns
}

// installCRDs creates or updates every CRD of crds/ and waits until the
// apiserver serves them.
func installCRDs(ctx context.Context, t *testing.T, client apiextensionsclientset.Interface) {
	t.Helper()
	files, err := fs.Glob(crds.FS, "*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs embedded from crds/: %v", err)
	}
	for _, f := range files {
		data, err := fs.ReadFile(crds.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatalf("decode %s: %v", f, err)
		}
		crdClient := client.ApiextensionsV1().CustomResourceDefinitions()
		existing, err := crdClient.Get(ctx, crd.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = crdClient.Create(ctx, crd, metav1.CreateOptions{})
		case err == nil:
			crd.ResourceVersion = existing.ResourceVersion
			_, err = crdClient.Update(ctx, crd, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("install CRD %s from crds/%s: %v", crd.Name, f, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := crdClient.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", crd.Name, err)
		}
	}
}

// examples loads every description of descriptions/ and every application
// of examples/apps/ with the project's loader.
func examples(t *testing.T) []description.Object {
	t.Helper()
	set, err := description.LoadDir("../../../descriptions")
	if err != nil {
		t.Fatalf("load descriptions/: %v", err)
	}
	objs := set.Objects()
	apps, err := filepath.Glob("../../../examples/apps/*.yaml")
	if err != nil || len(apps) == 0 {
		t.Fatalf("no examples/apps/*.yaml: %v", err)
	}
	for _, f := range apps {
		obj, err := description.LoadFile(f)
		if err != nil {
			t.Fatalf("load %s: %v", f, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

func toUnstructured(t *testing.T, obj runtime.Object, ns string) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetNamespace(ns)
	return u
}

func TestExamplesAcceptedByAPIServer(t *testing.T) {
	ctx, dyn, ns := setup(t)
	objs := examples(t)
	kinds := map[string]int{}
	for _, obj := range objs {
		kind := description.KindOf(obj)
		kinds[kind]++
		t.Run(kind+"/"+obj.GetName(), func(t *testing.T) {
			created, err := dyn.Resource(gvr(kind)).Namespace(ns).Create(ctx, toUnstructured(t, obj, ns), strict)
			if err != nil {
				t.Fatalf("the apiserver rejects a description the loader accepts: %v", err)
			}
			// Read back through the typed API: the apiserver neither
			// dropped nor changed anything in the spec.
			back, err := dyn.Resource(gvr(kind)).Namespace(ns).Get(ctx, created.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, want := specOf(t, back.Object), specOf(t, toUnstructured(t, obj, ns).Object)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("spec changed by the apiserver (-loaded +stored):\n%s", diff)
			}
		})
	}
	for _, kind := range []string{mlsysopsv1.KindApp, mlsysopsv1.KindNode, mlsysopsv1.KindCluster, mlsysopsv1.KindContinuum} {
		if kinds[kind] == 0 {
			t.Errorf("no %s among the examples", kind)
		}
	}
}

// specOf returns an object's spec as plain JSON values, so that 20 read
// from the apiserver and 20.0 converted from a Go float compare equal.
func specOf(t *testing.T, obj map[string]interface{}) interface{} {
	t.Helper()
	spec, ok, err := unstructured.NestedFieldCopy(obj, "spec")
	if err != nil || !ok {
		t.Fatalf("object has no spec: %v", err)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var out interface{}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStatusSubresource(t *testing.T) {
	ctx, dyn, ns := setup(t)
	app, err := description.LoadFile("../../../examples/apps/gpu-inference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	client := dyn.Resource(gvr(mlsysopsv1.KindApp)).Namespace(ns)
	created, err := client.Create(ctx, toUnstructured(t, app, ns), strict)
	if err != nil {
		t.Fatal(err)
	}
	typed := &mlsysopsv1.MLSysOpsApp{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, typed); err != nil {
		t.Fatal(err)
	}
	typed.Status = mlsysopsv1.MLSysOpsAppStatus{
		ObservedGeneration: typed.Generation,
		Phase:              mlsysopsv1.AppRunning,
		Components: []mlsysopsv1.ComponentStatus{
			{Name: "llm-server", Cluster: "cloud-1", Nodes: []string{"cloud-gpu-h100-1"}, Replicas: 1, ReadyReplicas: 1},
		},
		Conditions: []metav1.Condition{{
			Type: mlsysopsv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "AllComponentsReady",
			Message: "every component runs", LastTransitionTime: metav1.Now(), ObservedGeneration: typed.Generation,
		}},
	}
	// A spec change sent to /status must be ignored.
	typed.Spec.Components[0].Metadata.UID = "changed-through-status"
	updated, err := client.UpdateStatus(ctx, toUnstructured(t, typed, ns), metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	back := &mlsysopsv1.MLSysOpsApp{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(updated.Object, back); err != nil {
		t.Fatal(err)
	}
	if back.Status.Phase != mlsysopsv1.AppRunning || len(back.Status.Components) != 1 || back.Status.Components[0].ReadyReplicas != 1 ||
		len(back.Status.Conditions) != 1 || back.Status.ObservedGeneration != back.Generation {
		t.Errorf("status not stored: %+v", back.Status)
	}
	if back.Spec.Components[0].Metadata.UID == "changed-through-status" {
		t.Errorf("a spec change went through the status subresource")
	}

	// The status schema is enforced too.
	bad := toUnstructured(t, back, ns)
	if err := unstructured.SetNestedField(bad.Object, "Exploded", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateStatus(ctx, bad, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("status.phase Exploded: err = %v, want Invalid", err)
	}
}

// TestRejectedLikeTheLoader sends broken objects to the apiserver and to
// the loader: both must reject them, at the same field.
func TestRejectedLikeTheLoader(t *testing.T) {
	ctx, dyn, ns := setup(t)
	cases := map[string]struct {
		doc   string
		field string
	}{
		"layer not in enum": {
			doc:   `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsNode", "metadata": {"name": "n-enum"}, "spec": {"continuum_layer": "fog", "environment": {}}}`,
			field: "spec.continuum_layer",
		},
		"missing required field": {
			doc:   `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsNode", "metadata": {"name": "n-required"}, "spec": {"continuum_layer": "edge"}}`,
			field: "spec.environment",
		},
		"unknown field": {
			doc:   `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsCluster", "metadata": {"name": "c-unknown"}, "spec": {"cluster_id": "c-unknown", "nodes": [], "colour": "blue"}}`,
			field: "spec.colour",
		},
		"port out of range": {
			doc: `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsApp", "metadata": {"name": "a-port"}, "spec": {"components": [
				{"metadata": {"name": "w"}, "containers": [{"image": "x", "ports": [{"container_port": 70000}]}]}]}}`,
			field: "spec.components[0].containers[0].ports[0].container_port",
		},
		"no components": {
			doc:   `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsApp", "metadata": {"name": "a-empty"}, "spec": {"components": []}}`,
			field: "spec.components",
		},
		"duplicate in a set": {
			doc:   `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsContinuum", "metadata": {"name": "k-dup"}, "spec": {"continuum_id": "k", "clusters": ["a", "a"]}}`,
			field: "spec.clusters[1]",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := description.Parse("case.json", []byte(tc.doc))
			var fields []string
			for _, e := range errs {
				fields = append(fields, e.Field)
			}
			if !slices.Contains(fields, tc.field) {
				t.Errorf("loader problems %v do not include %s", errs, tc.field)
			}

			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON([]byte(tc.doc)); err != nil {
				t.Fatal(err)
			}
			u.SetNamespace(ns)
			_, err := dyn.Resource(gvr(u.GetKind())).Namespace(ns).Create(ctx, u, strict)
			if err == nil {
				t.Fatalf("the apiserver accepted what the loader rejects")
			}
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("error %v is not an API status", err)
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Errorf("error = %v, want Invalid or BadRequest", err)
			}
			if msg := err.Error(); !containsField(msg, tc.field) {
				t.Errorf("apiserver error %q does not name %s", msg, tc.field)
			}
		})
	}
}

// containsField tells whether an apiserver message names a field path
// (it writes an unknown field as .spec.colour).
func containsField(msg, field string) bool {
	return strings.Contains(msg, field)
}

func TestDiscovery(t *testing.T) {
	env := testbed.Shared(t)
	cfg := env.RESTConfig(t, testbed.ContextKarmada)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	installCRDs(ctx, t, apiextensionsclientset.NewForConfigOrDie(cfg))
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	var list *metav1.APIResourceList
	// Discovery catches up with new CRDs asynchronously.
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		l, err := dc.ServerResourcesForGroupVersion(mlsysopsv1.SchemeGroupVersion.String())
		if err != nil {
			return false, nil
		}
		list = l
		return len(l.APIResources) >= 10, nil // five kinds and their status
	})
	if err != nil {
		t.Fatalf("discovery of %s: %v", mlsysopsv1.SchemeGroupVersion, err)
	}
	got := map[string][]string{}
	for _, r := range list.APIResources {
		if !r.Namespaced {
			t.Errorf("%s is not namespaced", r.Name)
		}
		if len(r.ShortNames) > 0 {
			got[r.Name] = append(append([]string(nil), r.ShortNames...), r.Categories...)
		}
	}
	want := map[string][]string{
		"mlsysopsapps":        {"mlsapp", "mlsysops"},
		"mlsysopsnodes":       {"mlsnode", "mlsysops"},
		"mlsysopsclusters":    {"mlscluster", "mlsysops"},
		"mlsysopscontinuums":  {"mlscontinuum", "mlsysops"},
		"mlsysopsdatacenters": {"mlsdatacenter", "mlsysops"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("short names and categories (-want +got):\n%s", diff)
	}
}
