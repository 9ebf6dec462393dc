package deployments_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	"github.com/mlsysops-go/mlsysops/deployments/charts"
	"github.com/mlsysops-go/mlsysops/deployments/deployer"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// karmadaWorkClient reads the applications, their bindings, Works and
// policies in the Karmada API.
func karmadaWorkClient(t *testing.T, env *testbed.Env) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{mlsysopsv1.AddToScheme, workv1alpha1.Install, workv1alpha2.Install, policyv1alpha1.Install} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.RESTConfig(t, testbed.ContextKarmada), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// appCopies returns the UID of application app's copy in each member it
// is placed on.
func appCopies(t *testing.T, env *testbed.Env, app string) map[string]types.UID {
	t.Helper()
	ctx := context.Background()
	kc := karmadaWorkClient(t, env)
	clusters, found, err := continuum.Placement(ctx, kc, app)
	if err != nil || !found || len(clusters) == 0 {
		var rbs workv1alpha2.ResourceBindingList
		lerr := kc.List(ctx, &rbs, client.InNamespace(mlsysopsv1.Namespace))
		var names []string
		for _, rb := range rbs.Items {
			names = append(names, fmt.Sprintf("%s %v %v", rb.Name, rb.Annotations, rb.Spec.Clusters))
		}
		var works workv1alpha1.WorkList
		werr := kc.List(ctx, &works)
		var wn []string
		for _, w := range works.Items {
			wn = append(wn, w.Namespace+"/"+w.Name+fmt.Sprint(w.Labels))
		}
		t.Fatalf("application %s: placed on %v (found %v, err %v); bindings in %s (%v): %v; Works (%v): %v", app, clusters, found, err, mlsysopsv1.Namespace, lerr, names, werr, wn)
	}
	out := map[string]types.UID{}
	for _, c := range clusters {
		var cp mlsysopsv1.MLSysOpsApp
		if err := karmadaClient(t, env, c).Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: app}, &cp); err != nil {
			t.Fatalf("application %s's copy in %s: %v", app, c, err)
		}
		out[c] = cp.UID
	}
	return out
}

// checkMovedToWorks waits until application app is propagated through
// the continuum's Works on the clusters of copies, with no binding and no
// policy for the applications left, and checks that the members' copies
// are those of before (same UIDs) and the application Running.
func checkMovedToWorks(t *testing.T, env *testbed.Env, app string, copies map[string]types.UID) {
	t.Helper()
	ctx := context.Background()
	kc := karmadaWorkClient(t, env)
	want := make([]string, 0, len(copies))
	for c := range copies {
		want = append(want, c)
	}
	slices.Sort(want)
	testbed.Eventually(t, "application "+app+" propagated through the continuum's Works", 3*time.Minute, func() error {
		var works workv1alpha1.WorkList
		if err := kc.List(ctx, &works, client.MatchingLabels{continuum.LabelWorkApp: app}); err != nil {
			return err
		}
		var got []string
		for _, w := range works.Items {
			got = append(got, strings.TrimPrefix(w.Namespace, "karmada-es-"))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("Works on %v, want %v", got, want)
		}
		err := kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: continuum.BindingName(app)}, &workv1alpha2.ResourceBinding{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("its ResourceBinding still there (err %v)", err)
		}
		err = kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: "mlsysops-apps"}, &policyv1alpha1.PropagationPolicy{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the applications' PropagationPolicy still there (err %v)", err)
		}
		var a mlsysopsv1.MLSysOpsApp
		if err := kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: app}, &a); err != nil {
			return err
		}
		if a.Status.Phase != mlsysopsv1.AppRunning {
			return fmt.Errorf("application %s", a.Status.Phase)
		}
		return nil
	})
	for c, uid := range copies {
		var cp mlsysopsv1.MLSysOpsApp
		if err := karmadaClient(t, env, c).Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: app}, &cp); err != nil {
			t.Errorf("application %s's copy in %s: %v", app, c, err)
			continue
		}
		if cp.UID != uid {
			t.Errorf("application %s's copy in %s was made again (UID %s, before %s)", app, c, cp.UID, uid)
		}
	}
}

// installAgain runs the install of o again without waiting, and returns
// what it wrote ("<outcome> <object>", every object not unchanged) and its
// output.
func installAgain(t *testing.T, o *deployer.Options) (written []string, output string) {
	t.Helper()
	again := *o
	again.NoWait = true
	var out bytes.Buffer
	rep, err := deployer.New(&again, &out).Install(context.Background())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, r := range rep.Results {
		if r.Outcome != deployer.Unchanged {
			written = append(written, string(r.Outcome)+" "+r.Ref())
		}
	}
	return written, out.String()
}

// testPrune checks that an install deletes the objects of the
// installation it no longer renders (as an earlier version's or other
// options' left them), and keeps what uninstall also keeps without
// --purge and Karmada's copies in a host that is also a member.
func testPrune(t *testing.T, env *testbed.Env, o *deployer.Options) {
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, testbed.ContextHost))
	owned := map[string]string{charts.LabelPartOf: charts.PartOfValue, charts.LabelInstance: charts.Release}
	objs := map[string]*corev1.ConfigMap{
		"stale": {ObjectMeta: metav1.ObjectMeta{Name: "mlsysops-prune-stale", Labels: owned}},
		"purge-only": {ObjectMeta: metav1.ObjectMeta{Name: "mlsysops-prune-purge-only", Labels: owned,
			Annotations: map[string]string{deployer.PurgeKey: "purge"}}},
		"karmada's copy": {ObjectMeta: metav1.ObjectMeta{Name: "mlsysops-prune-copy",
			Labels: map[string]string{charts.LabelPartOf: charts.PartOfValue, charts.LabelInstance: charts.Release, "karmada.io/managed": "true"}}},
	}
	for _, cm := range objs {
		if _, err := cs.CoreV1().ConfigMaps(deployer.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.CoreV1().ConfigMaps(deployer.Namespace).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
		})
	}
	written, out := installAgain(t, o)
	want := []string{string(deployer.Deleted) + " " + (deployer.Result{Cluster: "host", Kind: "ConfigMap", Namespace: deployer.Namespace, Name: objs["stale"].Name}).Ref()}
	if !slices.Equal(written, want) {
		t.Errorf("the install wrote:\n%s\nwant only:\n%s\noutput:\n%s", strings.Join(written, "\n"), strings.Join(want, "\n"), out)
	}
	for what, cm := range objs {
		_, err := cs.CoreV1().ConfigMaps(deployer.Namespace).Get(ctx, cm.Name, metav1.GetOptions{})
		if gone := apierrors.IsNotFound(err); gone != (what == "stale") {
			t.Errorf("%s ConfigMap %s: gone %v (err %v)", what, cm.Name, gone, err)
		}
	}
}
