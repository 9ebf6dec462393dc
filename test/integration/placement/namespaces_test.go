package placement_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mlsysops-go/mlsysops/agents/cluster"
	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// The cluster agent's application namespaces: the chaos soak found one
// made in the same second Karmada deleted the application's copy, left
// for good. These tests run the cluster agent's code against cloud-1's
// real API server; where they need the cache to lag (as it did there),
// the reconciler's client is a view of the API server that has not seen
// an object yet, and its Live reader is the API server itself.

// lagging is a member client whose cache has not caught up: Gets of
// namespaces say NotFound, Gets of applications return what was read
// before (stale, when set).
type lagging struct {
	client.Client
	stale *mlsysopsv1.MLSysOpsApp
}

func (l lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.Namespace:
		return apierrors.NewNotFound(corev1.Resource("namespaces"), key.Name)
	case *mlsysopsv1.MLSysOpsApp:
		if l.stale != nil && key.Name == l.stale.Name {
			l.stale.DeepCopyInto(o)
			return nil
		}
	}
	return l.Client.Get(ctx, key, obj, opts...)
}

// memberEnv returns a client of cloud-1, a namespace of its own for the
// test's applications (no agent watches it) and a name suffix.
func memberEnv(t *testing.T) (client.Client, string, string) {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	env := testbed.Shared(t)
	scheme, err := cluster.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	mc, err := client.New(env.RESTConfig(t, "cloud-1"), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The MLSysOps CRDs reach the members through Karmada.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := continuum.EnsureAPI(ctx, env.RESTConfig(t, testbed.ContextKarmada)); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		return mc.List(ctx, &mlsysopsv1.MLSysOpsAppList{}, client.InNamespace(mlsysopsv1.Namespace)) == nil, nil
	})
	if err != nil {
		t.Fatalf("the MLSysOps CRDs never reached cloud-1: %v", err)
	}
	if err := mc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mlsysopsv1.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	suffix := rand.String(5)
	home := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nstest-" + suffix}}
	if err := mc.Create(context.Background(), home); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Delete(context.Background(), home) })
	return mc, home.Name, suffix
}

func appIn(ns, name string) *mlsysopsv1.MLSysOpsApp {
	a := &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: []string{mlsysopsv1.Finalizer}}}
	a.Spec.Name = name
	a.Spec.Components = []mlsysopsv1.Component{{Metadata: mlsysopsv1.ComponentMetadata{Name: "c"},
		Containers: []mlsysopsv1.Container{{Image: "registry.example.org/c:1"}}}}
	return a
}

// appNamespace makes the namespace the cluster agent makes for app.
func appNamespace(t *testing.T, mc client.Client, app string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: members.Namespace(app), Labels: map[string]string{
		mlsysopsv1.LabelApp: app, mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}}}
	if err := mc.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Delete(context.Background(), ns) })
	return ns
}

// namespaceGoing tells whether the namespace is gone or being deleted.
func namespaceGoing(ctx context.Context, mc client.Client, name string) (bool, error) {
	ns := &corev1.Namespace{}
	err := mc.Get(ctx, types.NamespacedName{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return err == nil && !ns.DeletionTimestamp.IsZero(), err
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestRemovalFindsNamespaceTheCacheHasNot: the removal pass of a deleted
// application asks the API server, not the cache, whether its namespace
// exists; a cache that has not seen the namespace yet must not let the
// application go with its namespace left behind.
func TestRemovalFindsNamespaceTheCacheHasNot(t *testing.T) {
	mc, home, suffix := memberEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	app := appIn(home, "gone-"+suffix)
	if err := mc.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	ns := appNamespace(t, mc, app.Name)
	if err := mc.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	r := cluster.NewAppReconciler(lagging{Client: mc}, "cloud-1", quietLog())
	r.Live = mc
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(app)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if going, err := namespaceGoing(ctx, mc, ns.Name); err != nil || !going {
		t.Fatalf("after the removal pass namespace %s is neither gone nor being deleted (%v)", ns.Name, err)
	}
	// The application stays (its finalizer) until the namespace is gone.
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := mc.Get(ctx, types.NamespacedName{Name: ns.Name}, &corev1.Namespace{}); err == nil {
			cur := &mlsysopsv1.MLSysOpsApp{}
			if err := mc.Get(ctx, client.ObjectKeyFromObject(app), cur); err != nil {
				t.Fatalf("application let go while its namespace still exists: %v", err)
			}
		}
		if _, err := r.Reconcile(ctx, req); err != nil {
			return false, err
		}
		err := mc.Get(ctx, client.ObjectKeyFromObject(app), &mlsysopsv1.MLSysOpsApp{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("application not let go after its namespace: %v", err)
	}
}

// TestNamespaceMadeForRemovedAppDeleted: a pass that read the application
// from a cache not yet showing its removal, and so made its namespace
// after the removal, deletes that namespace at once.
func TestNamespaceMadeForRemovedAppDeleted(t *testing.T) {
	mc, home, suffix := memberEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	app := appIn(home, "late-"+suffix)
	if err := mc.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	stale := app.DeepCopy()
	app.Finalizers = nil
	if err := mc.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	if err := mc.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	r := cluster.NewAppReconciler(lagging{Client: mc, stale: stale}, "cloud-1", quietLog())
	r.Live = mc
	name := members.Namespace(app.Name)
	t.Cleanup(func() {
		_ = mc.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	// Bounded: without the check the pass would go on to wait for a
	// placement index this test does not feed.
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	_, err := r.Reconcile(pctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(app)})
	pcancel()
	if err != nil {
		t.Errorf("pass: %v", err)
	}
	made := &corev1.Namespace{}
	if err := mc.Get(ctx, types.NamespacedName{Name: name}, made); err == nil && made.DeletionTimestamp.IsZero() {
		t.Fatalf("namespace %s made for a removed application is left (labels %v)", name, made.Labels)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// TestOrphanNamespaceSwept: the sweep deletes, after the grace, an
// application namespace whose application is gone from the member, and
// keeps those of applications there, namespaces not named after their
// application, and namespaces not labelled as the agent's.
func TestOrphanNamespaceSwept(t *testing.T) {
	mc, _, suffix := memberEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	orphan := appNamespace(t, mc, "ghost-"+suffix)
	keptApp := appIn(mlsysopsv1.Namespace, "kept-"+suffix)
	keptApp.Finalizers = nil
	if err := mc.Create(ctx, keptApp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Delete(context.Background(), keptApp) })
	kept := appNamespace(t, mc, keptApp.Name)
	misnamed := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other-" + suffix, Labels: map[string]string{
		mlsysopsv1.LabelApp: "x-" + suffix, mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}}}
	unlabelled := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: members.Namespace("plain-" + suffix)}}
	for _, ns := range []*corev1.Namespace{misnamed, unlabelled} {
		if err := mc.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mc.Delete(context.Background(), ns) })
	}

	now := time.Now()
	s := &cluster.NamespaceSweeper{Live: mc, Writer: mc, Grace: time.Minute, Log: quietLog(), Now: func() time.Time { return now }}
	if deleted, err := s.Sweep(ctx); err != nil || len(deleted) != 0 {
		t.Fatalf("first sweep: deleted %v, %v; want nothing yet (the grace)", deleted, err)
	}
	now = now.Add(61 * time.Second)
	deleted, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range deleted {
		found = found || d == orphan.Name
		if d == kept.Name || d == misnamed.Name || d == unlabelled.Name {
			t.Errorf("swept %s", d)
		}
	}
	if !found {
		t.Errorf("swept %v; want %s among them", deleted, orphan.Name)
	}
	if going, err := namespaceGoing(ctx, mc, orphan.Name); err != nil || !going {
		t.Errorf("orphan namespace %s neither gone nor being deleted (%v)", orphan.Name, err)
	}
	for _, ns := range []*corev1.Namespace{kept, misnamed, unlabelled} {
		if going, err := namespaceGoing(ctx, mc, ns.Name); err != nil || going {
			t.Errorf("namespace %s: going %v, %v; want it kept", ns.Name, going, err)
		}
	}
}
