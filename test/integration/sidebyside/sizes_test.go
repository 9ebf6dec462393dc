package sidebyside_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// objectSizes are the mean sizes in JSON (as Karmada's API server stores
// and serves them, managed fields included) of the objects a run left in
// Karmada, by kind: what each write and watch event of them carries.
type objectSizes map[string]struct {
	n     int
	bytes int
}

// sizes reads the objects of the run whose applications' names start
// with prefix: their templates, ResourceBindings and Works. It is read
// after the run, with each object's last state.
func (h *harness) sizes(tb testing.TB, p Path, prefix string) objectSizes {
	tb.Helper()
	ctx := context.Background()
	ns, template := mlsysopsv1.Namespace, mlsysopsv1.SchemeGroupVersion.WithKind("MLSysOpsAppList")
	if p == PathRaw {
		ns, template = rawNamespace, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DeploymentList"}
	}
	out := objectSizes{}
	add := func(kind string, o map[string]any) {
		b, err := json.Marshal(o)
		if err != nil {
			return
		}
		s := out[kind]
		s.n++
		s.bytes += len(b)
		out[kind] = s
	}
	ours := func(name string) bool { return strings.HasPrefix(name, prefix+"-") }
	list := func(gvk schema.GroupVersionKind, opts ...client.ListOption) []unstructured.Unstructured {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk)
		if err := h.karmada.List(ctx, l, opts...); err != nil {
			tb.Logf("object sizes: list %s: %v", gvk.Kind, err)
			return nil
		}
		return l.Items
	}
	for _, o := range list(template, client.InNamespace(ns)) {
		if ours(o.GetName()) {
			add(strings.TrimSuffix(template.Kind, "List"), o.Object)
		}
	}
	for _, o := range list(workv1alpha2.SchemeGroupVersion.WithKind("ResourceBindingList"), client.InNamespace(ns)) {
		if ours(o.GetName()) {
			add("ResourceBinding", o.Object)
		}
	}
	for _, o := range list(schema.GroupVersionKind{Group: "work.karmada.io", Version: "v1alpha1", Kind: "WorkList"}) {
		// Karmada's binding controller names the binding a Work comes
		// from; the continuum labels those it writes itself.
		if ours(o.GetAnnotations()[workv1alpha2.ResourceBindingNameAnnotationKey]) || ours(o.GetLabels()[mlsysopsv1.LabelPrefix+"app"]) {
			add("Work", o.Object)
		}
	}
	return out
}

// String is "kind mean bytes (objects)", kinds in order.
func (s objectSizes) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		parts = append(parts, fmt.Sprintf("%s %d bytes (%d)", k, s[k].bytes/s[k].n, s[k].n))
	}
	if len(parts) == 0 {
		return "none found"
	}
	return strings.Join(parts, ", ")
}
