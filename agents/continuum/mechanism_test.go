package continuum

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestParseClusterCommand(t *testing.T) {
	cases := map[string]struct {
		cmd      map[string]any
		app      string
		clusters []string
		wantErr  string
	}{
		"upstream shape": {
			cmd: map[string]any{"action": map[string]any{"component": "edge-1"}, "app": []any{map[string]any{"name": "demo"}}},
			app: "demo", clusters: []string{"edge-1"},
		},
		"name and every component": {
			cmd: map[string]any{"name": "demo", "action": map[string]any{"a": "c1", "b": "c1"}},
			app: "demo", clusters: []string{"c1"},
		},
		"a list of clusters": {
			cmd: map[string]any{"app": map[string]any{"name": "demo"}, "action": map[string]any{"a": []any{"c2", "c1"}}},
			app: "demo", clusters: []string{"c1", "c2"},
		},
		"components apart": {
			cmd:     map[string]any{"name": "demo", "action": map[string]any{"a": "c1", "b": "c2"}},
			wantErr: "clusterPlacement: a goes to [c1] but b to [c2]; the components of an application run in the same clusters, so name the same ones for all",
		},
		"no cluster": {
			cmd:     map[string]any{"name": "demo", "action": map[string]any{"a": ""}},
			wantErr: "clusterPlacement: action.a must name a cluster (or a list of clusters)",
		},
		"no application": {
			cmd:     map[string]any{"action": map[string]any{"a": "c1"}},
			wantErr: "clusterPlacement: the command needs action {component: cluster} and the application (app or name)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			app, clusters, err := ParseClusterCommand(tc.cmd)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v\nwant    %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if app != tc.app || !cmp.Equal(clusters, tc.clusters) {
				t.Errorf("got %s %v, want %s %v", app, clusters, tc.app, tc.clusters)
			}
		})
	}
}

// cluster is a Ready member with one node; gpu gives it an H100.
func cluster(name string, ready, gpu bool) placement.Cluster {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	labels := map[string]string{mlsysopsv1.LabelHostname: name + "-n1", mlsysopsv1.LabelArch: "amd64", mlsysopsv1.LabelKubeOS: "linux"}
	if gpu {
		capacity[mlsysopsv1.ResourceGPU] = resource.MustParse("1")
		labels[mlsysopsv1.LabelGPUPresent] = "true"
		labels[mlsysopsv1.LabelGPUProduct] = "NVIDIA-H100-80GB-HBM3"
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-n1", Labels: labels},
		Status: corev1.NodeStatus{Allocatable: capacity, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	return placement.Cluster{Name: name, Ready: ready, Index: placement.NewIndexOf([]placement.Node{{Node: n}})}
}

type fixedCapacity []placement.Cluster

func (f fixedCapacity) Clusters(context.Context) ([]placement.Cluster, error) { return f, nil }

func app(name string, clusterIDs ...string) *mlsysopsv1.MLSysOpsApp {
	cpu := resource.MustParse("1")
	a := &mlsysopsv1.MLSysOpsApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace},
		Spec: mlsysopsv1.MLSysOpsAppSpec{Name: name, Components: []mlsysopsv1.Component{{
			Metadata: mlsysopsv1.ComponentMetadata{Name: "infer"},
			Containers: []mlsysopsv1.Container{{Image: "registry.example/infer:1", PlatformRequirements: &mlsysopsv1.PlatformRequirements{
				CPU: &mlsysopsv1.CPURequirements{Requests: &cpu},
			}}},
		}}},
	}
	if len(clusterIDs) > 0 {
		a.Spec.ClusterPlacement = &mlsysopsv1.ClusterPlacement{ClusterID: clusterIDs}
	}
	return a
}

func withGPU(a *mlsysopsv1.MLSysOpsApp) *mlsysopsv1.MLSysOpsApp {
	a.Spec.Components[0].Containers[0].PlatformRequirements.GPU = &mlsysopsv1.GPURequirements{Model: "h100", Requests: 1, Limits: 1}
	return a
}

// copies asks n copies of the application (cluster_placement.instances).
func copies(a *mlsysopsv1.MLSysOpsApp, n int32) *mlsysopsv1.MLSysOpsApp {
	if a.Spec.ClusterPlacement == nil {
		a.Spec.ClusterPlacement = &mlsysopsv1.ClusterPlacement{}
	}
	a.Spec.ClusterPlacement.Instances = n
	return a
}

func TestPinProblem(t *testing.T) {
	clusters := []placement.Cluster{cluster("cloud", true, true), cluster("edge", true, false), cluster("down", false, false)}
	cases := map[string]struct {
		app     *mlsysopsv1.MLSysOpsApp
		wanted  []string
		gone    map[string]string
		current []string
		want    string
	}{
		"eligible":              {app: app("a"), wanted: []string{"edge"}},
		"user's list":           {app: app("a", "cloud"), wanted: []string{"edge"}, want: "the application's cluster_placement.cluster_id [cloud] does not list [edge]; the user's choice wins (edit cluster_id to move the application)"},
		"not ready":             {app: app("a"), wanted: []string{"down"}, want: "cluster down is not Ready (or has not got the MLSysOpsApp API yet)"},
		"agent gone":            {app: app("a"), wanted: []string{"edge"}, gone: map[string]string{"edge": "cluster agent gone"}, want: "cluster edge: cluster agent gone"},
		"unknown":               {app: app("a"), wanted: []string{"mars"}, want: "cluster mars is not a member cluster of Karmada"},
		"lacks the GPU":         {app: withGPU(app("a")), wanted: []string{"edge"}, want: "cluster edge is not eligible: "},
		"already there is kept": {app: withGPU(app("a")), wanted: []string{"edge"}, current: []string{"edge"}},
		"two for one copy":      {app: app("a"), wanted: []string{"cloud", "edge"}, current: []string{"cloud"}, want: "2 cluster(s) [cloud edge] for an application of 1 copy (cluster_placement.instances); the user's choice wins"},
		"one for two copies":    {app: copies(app("a"), 2), wanted: []string{"cloud"}, current: []string{"cloud"}, want: "1 cluster(s) [cloud] for an application of 2 copies (cluster_placement.instances); the user's choice wins"},
		"two for two copies":    {app: copies(app("a"), 2), wanted: []string{"cloud", "edge"}, current: []string{"cloud"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := pinProblem(tc.app, tc.wanted, clusters, tc.gone, tc.current)
			if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
				t.Errorf("pinProblem = %q, want %q", got, tc.want)
			}
		})
	}
}

func newFake(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

// binding is the ResourceBinding Karmada's detector makes for app under
// AppPropagation, placed on clusters by the continuum when any are given.
func binding(app string, clusters ...string) *workv1alpha2.ResourceBinding {
	rb := &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: BindingName(app), Namespace: mlsysopsv1.Namespace, Generation: 1},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource:      workv1alpha2.ObjectReference{APIVersion: mlsysopsv1.SchemeGroupVersion.String(), Kind: "MLSysOpsApp", Namespace: mlsysopsv1.Namespace, Name: app},
			Placement:     &policyv1alpha1.Placement{},
			SchedulerName: SchedulerName,
		},
	}
	if len(clusters) > 0 {
		rb.Annotations = map[string]string{mlsysopsv1.AnnotationPlacement: strings.Join(clusters, ",")}
		for _, c := range clusters {
			rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: c})
		}
	}
	return rb
}

func TestClusterPlacementApply(t *testing.T) {
	capacity := fixedCapacity{cluster("cloud", true, true), cluster("edge", true, false)}
	cmd := func(name, to string) map[string]any {
		return map[string]any{mechanism.PlanIDKey: "p1", "action": map[string]any{"component": to}, "app": []any{map[string]any{"name": name}}}
	}
	ctx := context.Background()

	t.Run("already there", func(t *testing.T) {
		kc := newFake(t, app("a"), binding("a", "edge"))
		m := NewClusterPlacement(kc, capacity, quiet(), ClusterPlacementOptions{})
		defer m.Close()
		res, err := m.Apply(ctx, cmd("a", "edge"))
		if err != nil || res.Status != mechanism.StatusSuccess {
			t.Fatalf("Apply = %+v, %v; want Success", res, err)
		}
		got := &mlsysopsv1.MLSysOpsApp{}
		_ = kc.Get(ctx, client.ObjectKey{Namespace: mlsysopsv1.Namespace, Name: "a"}, got)
		if _, ok := got.Annotations[mlsysopsv1.AnnotationClusters]; ok {
			t.Error("a plan that changes nothing pinned the application")
		}
	})
	t.Run("move is pinned and pending", func(t *testing.T) {
		kc := newFake(t, app("a"), binding("a", "edge"))
		m := NewClusterPlacement(kc, capacity, quiet(), ClusterPlacementOptions{})
		defer m.Close()
		res, err := m.Apply(ctx, cmd("a", "cloud"))
		if err != nil || res.Status != mechanism.StatusPending {
			t.Fatalf("Apply = %+v, %v; want Pending", res, err)
		}
		got := &mlsysopsv1.MLSysOpsApp{}
		_ = kc.Get(ctx, client.ObjectKey{Namespace: mlsysopsv1.Namespace, Name: "a"}, got)
		pin, err := readPin(got)
		if err != nil || pin == nil || pin.Plan != "p1" || !cmp.Equal(pin.Clusters, []string{"cloud"}) {
			t.Errorf("pin = %+v, %v", pin, err)
		}
	})
	for name, tc := range map[string]struct {
		app  *mlsysopsv1.MLSysOpsApp
		to   string
		want string
	}{
		"the user's cluster_id wins": {app: app("a", "edge"), to: "cloud", want: "clusterPlacement cannot place a on [cloud]: the application's cluster_placement.cluster_id [edge] does not list [cloud]"},
		"ineligible":                 {app: withGPU(app("a")), to: "edge", want: "clusterPlacement cannot place a on [edge]: cluster edge is not eligible: "},
		"unknown application":        {app: app("other"), to: "edge", want: "clusterPlacement: application a does not exist in Karmada"},
	} {
		t.Run(name, func(t *testing.T) {
			kc := newFake(t, tc.app, binding(tc.app.Name, "cloud"))
			m := NewClusterPlacement(kc, capacity, quiet(), ClusterPlacementOptions{})
			defer m.Close()
			_, err := m.Apply(ctx, cmd("a", tc.to))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant    %s...", err, tc.want)
			}
		})
	}
}

// The controller drops a pin that no longer holds and records why.
func TestPinnedDropsBrokenPins(t *testing.T) {
	a := app("a", "edge")
	a.Annotations = map[string]string{mlsysopsv1.AnnotationClusters: (&ClusterPin{Plan: "p1", Clusters: []string{"cloud"}}).encode()}
	kc := newFake(t, a)
	r := NewAppReconciler(kc, nil, quiet())
	ctx := context.Background()
	cur := &mlsysopsv1.MLSysOpsApp{}
	_ = kc.Get(ctx, client.ObjectKeyFromObject(a), cur)
	got, err := r.pinned(ctx, cur, []placement.Cluster{cluster("cloud", true, true), cluster("edge", true, false)}, nil, []string{"edge"}, quiet())
	if err != nil || got != nil {
		t.Fatalf("pinned = %v, %v; want the pin dropped", got, err)
	}
	_ = kc.Get(ctx, client.ObjectKeyFromObject(a), cur)
	if _, ok := cur.Annotations[mlsysopsv1.AnnotationClusters]; ok {
		t.Error("the pin is still there")
	}
	if d := cur.Annotations[mlsysopsv1.AnnotationClustersDropped]; !strings.HasPrefix(d, "p1: the application's cluster_placement.cluster_id [edge] does not list [cloud]") {
		t.Errorf("dropped = %q", d)
	}

	// A pin that holds is honoured.
	cur.Annotations[mlsysopsv1.AnnotationClusters] = (&ClusterPin{Plan: "p2", Clusters: []string{"edge"}}).encode()
	got, err = r.pinned(ctx, cur, []placement.Cluster{cluster("edge", true, false)}, nil, nil, quiet())
	if err != nil || !cmp.Equal(got, []string{"edge"}) {
		t.Errorf("pinned = %v, %v; want [edge]", got, err)
	}
}
