package continuum_test

import (
	"context"
	"slices"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// TestWorksPropagation runs the placement controller writing the Works
// itself (ControllersOptions.Works) against the real Karmada and its
// members: the applications' PropagationPolicy is removed and Karmada
// makes no binding; the application's Work carries Karmada's execution
// finalizer and Karmada applies it in the member; the member's status
// (the cluster agent's part, played here) comes back through the Work
// and makes the application Running; a change of its clusters moves the
// Work and the copy; its removal removes the Work and the copy.
func TestWorksPropagation(t *testing.T) {
	env, c := worksTestbed(t)
	stop := runControllers(t, continuum.ControllersOptions{Works: true})
	ctx := context.Background()
	noPolicy := func(t *testing.T) {
		t.Helper()
		var pp policyv1alpha1.PropagationPolicy
		if err := c.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: continuum.AppPropagationPolicy}, &pp); !apierrors.IsNotFound(err) {
			t.Fatalf("the applications' PropagationPolicy is there (%v): Karmada would bind them too", err)
		}
	}
	noPolicy(t)

	name := "works-" + rand.String(5)
	app := createOn(t, c, name, "cloud-1")
	waitApp(t, c, name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppDeploying })
	works := waitWorks(t, c, name, []string{"cloud-1"})
	if w := works["cloud-1"]; !slices.Contains(w.Finalizers, "karmada.io/execution-controller") {
		t.Errorf("Work %s/%s has finalizers %v: Karmada would not delete the member's copy with it", w.Namespace, w.Name, w.Finalizers)
	}
	unbound := func(t *testing.T) {
		t.Helper()
		var rb workv1alpha2.ResourceBinding
		if err := c.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: continuum.BindingName(name)}, &rb); !apierrors.IsNotFound(err) {
			t.Errorf("Karmada made a binding of the application (%v)", err)
		}
	}
	unbound(t)

	// Karmada applies the Work in cloud-1; the cluster agent's part is
	// played here: report the component ready.
	cloud := dynamic.NewForConfigOrDie(env.RESTConfig(t, "cloud-1")).Resource(appGVR).Namespace(mlsysopsv1.Namespace)
	member := waitMemberCopy(t, cloud, name)
	if member.GetAnnotations()["work.karmada.io/name"] != continuum.WorkName(name) {
		t.Errorf("the copy in cloud-1 names Work %q, want %q", member.GetAnnotations()["work.karmada.io/name"], continuum.WorkName(name))
	}
	reportRunning(t, cloud, member, "cloud-1")
	waitApp(t, c, name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppRunning })

	// A restart (a new leader, say) finds the application and its Work:
	// it makes no policy for the applications on its way up (Karmada
	// would bind the application, and the restart refuse to go on), and
	// keeps the Work.
	uid := works["cloud-1"].UID
	stop()
	runControllers(t, continuum.ControllersOptions{Works: true})
	noPolicy(t)
	unbound(t)
	if works = waitWorks(t, c, name, []string{"cloud-1"}); works["cloud-1"].UID != uid {
		t.Errorf("the restart replaced the Work in cloud-1")
	}
	waitApp(t, c, name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppRunning })

	// The user moves it: the Work and the copy move to edge-1.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cur := &mlsysopsv1.MLSysOpsApp{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(app), cur); err != nil {
			return false, nil
		}
		cur.Spec.ClusterPlacement.ClusterID = []string{"edge-1"}
		return c.Update(ctx, cur) == nil, nil
	})
	if err != nil {
		t.Fatalf("move the application: %v", err)
	}
	waitWorks(t, c, name, []string{"edge-1"})
	edge := dynamic.NewForConfigOrDie(env.RESTConfig(t, "edge-1")).Resource(appGVR).Namespace(mlsysopsv1.Namespace)
	copy := waitMemberCopy(t, edge, name)
	if ids, _, _ := unstructured.NestedStringSlice(copy.Object, "spec", "cluster_placement", "cluster_id"); !slices.Equal(ids, []string{"edge-1"}) {
		t.Errorf("the copy in edge-1 does not carry the new spec (cluster_id %v): %v", ids, copy.Object["spec"])
	}
	waitMemberGone(t, cloud, name)

	if err := c.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitWorks(t, c, name, nil)
	waitMemberGone(t, edge, name)
}

// TestBindingsMovedToWorks: a continuum agent started with the Works
// propagation where one with the bindings placed an application moves it
// to a Work of its own without touching its copy in the member (the same
// object, never deleted) and without a binding left; the application
// stays Running.
func TestBindingsMovedToWorks(t *testing.T) {
	env, c := worksTestbed(t)
	stop := runControllers(t, continuum.ControllersOptions{})
	ctx := context.Background()
	var err error
	name := "moved-" + rand.String(5)
	app := createOn(t, c, name, "cloud-1")
	cloud := dynamic.NewForConfigOrDie(env.RESTConfig(t, "cloud-1")).Resource(appGVR).Namespace(mlsysopsv1.Namespace)
	member := waitMemberCopy(t, cloud, name)
	reportRunning(t, cloud, member, "cloud-1")
	waitApp(t, c, name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppRunning })

	stop()
	runControllers(t, continuum.ControllersOptions{Works: true})
	var rb workv1alpha2.ResourceBinding
	if err := c.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: continuum.BindingName(name)}, &rb); !apierrors.IsNotFound(err) {
		t.Errorf("the binding is still there (%v)", err)
	}
	waitWorks(t, c, name, []string{"cloud-1"})
	var copy *unstructured.Unstructured
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		copy, err = cloud.Get(ctx, name, metav1.GetOptions{})
		return err == nil && copy.GetAnnotations()["work.karmada.io/name"] == continuum.WorkName(name) &&
			copy.GetLabels()["karmada.io/managed"] == "true", nil
	})
	if err != nil {
		t.Fatalf("the copy in cloud-1 was not taken over by the continuum's Work: %v (%v)", err, copy)
	}
	if copy.GetUID() != member.GetUID() {
		t.Errorf("the copy in cloud-1 was replaced (uid %s, was %s)", copy.GetUID(), member.GetUID())
	}
	waitApp(t, c, name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppRunning })
	if err := c.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitWorks(t, c, name, nil)
	waitMemberGone(t, cloud, name)
}

// TestWorksMovedToBindings: a continuum agent started with the binding
// propagation where one with the Works propagation placed an application
// moves it to its ResourceBinding, scheduled on the same cluster, without
// touching its copy in the member (the same object, never deleted, taken
// over by the binding's Work) and without a Work of its own left; the
// application stays Running. A restart with nothing to move changes
// nothing.
func TestWorksMovedToBindings(t *testing.T) {
	env, c := worksTestbed(t)
	stop := runControllers(t, continuum.ControllersOptions{Works: true})
	ctx := context.Background()
	name := "back-" + rand.String(5)
	app := createOn(t, c, name, "cloud-1")
	waitWorks(t, c, name, []string{"cloud-1"})
	cloud := dynamic.NewForConfigOrDie(env.RESTConfig(t, "cloud-1")).Resource(appGVR).Namespace(mlsysopsv1.Namespace)
	member := waitMemberCopy(t, cloud, name)
	reportRunning(t, cloud, member, "cloud-1")
	waitApp(t, c, name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppRunning })

	stop()
	// The move is done once the controllers are up.
	stop = runControllers(t, continuum.ControllersOptions{})
	moved := func(t *testing.T) *workv1alpha2.ResourceBinding {
		t.Helper()
		var works workv1alpha1.WorkList
		if err := c.List(ctx, &works, client.HasLabels{continuum.LabelWorkApp}); err != nil {
			t.Fatal(err)
		}
		for _, w := range works.Items {
			t.Errorf("Work %s/%s of application %s is left", w.Namespace, w.Name, w.Labels[continuum.LabelWorkApp])
		}
		var rb workv1alpha2.ResourceBinding
		if err := c.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: continuum.BindingName(name)}, &rb); err != nil {
			t.Fatalf("no binding of the application: %v", err)
		}
		var scheduled []string
		for _, tc := range rb.Spec.Clusters {
			scheduled = append(scheduled, tc.Name)
		}
		placed, _ := continuum.PlacedClusters(&rb)
		if !slices.Equal(scheduled, []string{"cloud-1"}) || !slices.Equal(placed, []string{"cloud-1"}) {
			t.Errorf("the binding is scheduled on %v, placed on %v, want cloud-1", scheduled, placed)
		}
		return &rb
	}
	rb := moved(t)
	var copy *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		copy, err = cloud.Get(ctx, name, metav1.GetOptions{})
		return err == nil && copy.GetAnnotations()[workv1alpha2.ResourceBindingNameAnnotationKey] == continuum.BindingName(name) &&
			copy.GetAnnotations()["work.karmada.io/name"] != continuum.WorkName(name) &&
			copy.GetLabels()["karmada.io/managed"] == "true", nil
	})
	if err != nil {
		t.Fatalf("the copy in cloud-1 was not taken over by the binding's Work: %v (%v)", err, copy)
	}
	if copy.GetUID() != member.GetUID() {
		t.Errorf("the copy in cloud-1 was replaced (uid %s, was %s)", copy.GetUID(), member.GetUID())
	}
	waitApp(t, c, name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppRunning })

	// Nothing to move: the binding, its placement and the copy stay.
	stop()
	runControllers(t, continuum.ControllersOptions{})
	if again := moved(t); again.UID != rb.UID || again.Generation != rb.Generation {
		t.Errorf("the restart changed the binding (uid %s, generation %d; was %s, %d)", again.UID, again.Generation, rb.UID, rb.Generation)
	}
	if cur, err := cloud.Get(ctx, name, metav1.GetOptions{}); err != nil || cur.GetUID() != member.GetUID() {
		t.Errorf("the restart replaced the copy in cloud-1 (%v)", err)
	}
	waitApp(t, c, name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppRunning })
	if err := c.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitMemberGone(t, cloud, name)
}

// worksTestbed returns the shared testbed and a client on Karmada, once
// the members serve the MLSysOps API (installed here when no test ran
// before on a new testbed); the applications' policy, which the Works
// propagation removes, is made again at the test's end for the other
// tests sharing the testbed, which place through bindings.
func worksTestbed(t *testing.T) (*testbed.Env, client.Client) {
	t.Helper()
	env := testbed.Shared(t)
	scheme, _ := continuum.Scheme()
	c, err := client.New(env.RESTConfig(t, testbed.ContextKarmada), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := continuum.EnsureAPI(context.Background(), env.RESTConfig(t, testbed.ContextKarmada)); err != nil {
		t.Fatalf("install the MLSysOps API in Karmada: %v", err)
	}
	waitAppAPI(t, env)
	t.Cleanup(func() {
		if err := continuum.EnsureAPI(context.Background(), env.RESTConfig(t, testbed.ContextKarmada)); err != nil {
			t.Errorf("restore the applications' PropagationPolicy: %v", err)
		}
	})
	return env, c
}

// createOn creates an application of one CPU component that the user
// keeps on cluster (cluster_id), removed at the test's end.
func createOn(t *testing.T, c client.Client, name, cluster string) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	app := gpuApp(name, "", 0)
	app.Spec.Components[0].Containers[0].PlatformRequirements.GPU = nil
	app.Spec.ClusterPlacement = &mlsysopsv1.ClusterPlacement{ClusterID: []string{cluster}}
	if err := c.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), app) })
	return app
}

// reportRunning plays the cluster agent's part: it reports the copy's
// component ready in its status.
func reportRunning(t *testing.T, r dynamic.ResourceInterface, member *unstructured.Unstructured, cluster string) {
	t.Helper()
	member.Object["status"] = map[string]any{
		"phase":      "Running",
		"components": []any{map[string]any{"name": "infer", "nodes": []any{cluster}, "replicas": int64(1), "readyReplicas": int64(1)}},
	}
	if _, err := r.UpdateStatus(context.Background(), member, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitWorks waits until the application's Works, live, are those of
// clusters (none being deleted) and returns them by cluster.
func waitWorks(t *testing.T, c client.Client, app string, clusters []string) map[string]*workv1alpha1.Work {
	t.Helper()
	var got map[string]*workv1alpha1.Work
	var names []string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list workv1alpha1.WorkList
		if err := c.List(ctx, &list, client.MatchingLabels{continuum.LabelWorkApp: app}); err != nil {
			return false, nil
		}
		got, names = map[string]*workv1alpha1.Work{}, nil
		for i := range list.Items {
			w := &list.Items[i]
			cluster := w.Namespace[len("karmada-es-"):]
			got[cluster] = w
			names = append(names, cluster)
		}
		slices.Sort(names)
		return slices.Equal(names, clusters), nil
	})
	if err != nil {
		t.Fatalf("Works of %s in %v, want %v: %v", app, names, clusters, err)
	}
	return got
}

func waitMemberCopy(t *testing.T, r dynamic.ResourceInterface, name string) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = r.Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("no copy of %s in the member: %v", name, err)
	}
	return got
}

func waitMemberGone(t *testing.T, r dynamic.ResourceInterface, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := r.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the member still has a copy of %s: %v", name, err)
	}
}
