package deployments_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/deployments/deployer"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// karmadaClient reaches the MLSysOps objects in the Karmada API.
func karmadaClient(t *testing.T, env *testbed.Env, context string) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := mlsysopsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.RESTConfig(t, context), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testAgentsRun checks that every agent runs as a pod of its DaemonSet
// (containers on the real nodes, kwoklet processes on the KWOK nodes),
// that every node agent registered with its cluster agent (its
// MLSysOpsNode Ready in its member), and that the example GPU application
// placed through the Karmada API, as the northbound API does, runs on
// the only node with its GPU. It returns the running application, which
// stays until owner ends (the later steps check it keeps running).
func testAgentsRun(t, owner *testing.T, env *testbed.Env) *mlsysopsv1.MLSysOpsApp {
	ctx := context.Background()
	real := map[string]bool{}
	for _, n := range env.RealNodes {
		real[n.Name] = true
	}
	where := func(node string) string {
		if real[node] {
			return "container on a real node"
		}
		return "kwoklet process on a KWOK node"
	}
	host := kubernetes.NewForConfigOrDie(env.RESTConfig(t, testbed.ContextHost))
	pods, err := host.CoreV1().Pods(deployer.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=mlsysops-continuum-agent"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || !podReady(&pods.Items[0]) {
		t.Fatalf("host cluster: want one ready continuum agent pod, have %d", len(pods.Items))
	}
	t.Logf("host: %s on %s (%s)", pods.Items[0].Name, pods.Items[0].Spec.NodeName, where(pods.Items[0].Spec.NodeName))

	for _, member := range env.Clusters {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, n := range nodes.Items {
			want = append(want, n.Name)
		}
		sort.Strings(want)
		pods, err := cs.CoreV1().Pods(deployer.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=mlsysops-node-agent"})
		if err != nil {
			t.Fatal(err)
		}
		var have []string
		for i := range pods.Items {
			p := &pods.Items[i]
			if podReady(p) {
				have = append(have, p.Spec.NodeName)
			}
			t.Logf("%s: %s on %s (%s), ready %v", member, p.Name, p.Spec.NodeName, where(p.Spec.NodeName), podReady(p))
		}
		sort.Strings(have)
		if strings.Join(have, ",") != strings.Join(want, ",") {
			t.Errorf("%s: ready node agent pods on %v, want one on each node %v", member, have, want)
		}
		// Registered: the cluster agent marks the node Ready once its
		// agent subscribed and sent its description.
		mc := karmadaClient(t, env, member)
		testbed.Eventually(t, "node agents of "+member+" registered", 2*time.Minute, func() error {
			var list mlsysopsv1.MLSysOpsNodeList
			if err := mc.List(ctx, &list, client.InNamespace(mlsysopsv1.Namespace)); err != nil {
				return err
			}
			phase := map[string]string{}
			for _, n := range list.Items {
				phase[n.Name] = string(n.Status.Phase)
			}
			for _, n := range want {
				if phase[n] != "Ready" {
					return fmt.Errorf("node %s: phase %q (all: %v)", n, phase[n], phase)
				}
			}
			return nil
		})
	}

	// The example GPU application, as `mls apps deploy-app` submits it.
	app := deployExample(t, owner, env, "gpu-inference.yaml")
	for _, c := range app.Status.Components {
		if c.Name == "llm-server" && (c.Cluster != "cloud-1" || strings.Join(c.Nodes, ",") != "cloud-gpu-h100-1") {
			t.Errorf("llm-server placed on %s %v, want cloud-1 [cloud-gpu-h100-1]", c.Cluster, c.Nodes)
		}
	}
	return app
}

// deployExample submits the example application in examples/apps/file
// under a fresh name, as `mls apps deploy-app` does, waits until it is
// Running and returns it; the end of owner (t itself or a test t is a
// subtest of) removes it.
func deployExample(t, owner *testing.T, env *testbed.Env, file string) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "apps", file))
	if err != nil {
		t.Fatal(err)
	}
	app, errs := description.ParseApp(data, description.FormatYAML)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	app.Name = strings.TrimSuffix(file, ".yaml") + "-" + rand.String(4)
	app.Spec.Name = app.Name
	app.Namespace = mlsysopsv1.Namespace
	kc := karmadaClient(t, env, testbed.ContextKarmada)
	if err := kc.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	owner.Cleanup(func() { _ = kc.Delete(context.Background(), app) })
	testbed.Eventually(t, "application "+app.Name+" Running", 3*time.Minute, func() error {
		if err := kc.Get(ctx, types.NamespacedName{Namespace: app.Namespace, Name: app.Name}, app); err != nil {
			return err
		}
		if app.Status.Phase != mlsysopsv1.AppRunning {
			return fmt.Errorf("phase %s: %s", app.Status.Phase, app.Status.Message)
		}
		return nil
	})
	return app
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// watchApp records every phase other than Running the application takes
// until the returned function is called, which returns them.
func watchApp(t *testing.T, env *testbed.Env, name string) func() []string {
	kc := karmadaClient(t, env, testbed.ContextKarmada)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var left []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			var app mlsysopsv1.MLSysOpsApp
			err := kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}, &app)
			switch {
			case apierrors.IsNotFound(err):
				// Gone: nothing left to watch, and nothing was proven.
				mu.Lock()
				left = append(left, "deleted")
				mu.Unlock()
				return
			case err == nil && app.Status.Phase != mlsysopsv1.AppRunning:
				mu.Lock()
				left = append(left, fmt.Sprintf("%s: %s", app.Status.Phase, app.Status.Message))
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() []string {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return left
	}
}

// deleteApp removes the application and waits until it is gone.
func deleteApp(t *testing.T, env *testbed.Env, app *mlsysopsv1.MLSysOpsApp) {
	kc := karmadaClient(t, env, testbed.ContextKarmada)
	if err := kc.Delete(context.Background(), app); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testbed.Eventually(t, "application "+app.Name+" gone", 2*time.Minute, func() error {
		err := kc.Get(context.Background(), types.NamespacedName{Namespace: app.Namespace, Name: app.Name}, &mlsysopsv1.MLSysOpsApp{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// testForbiddenCalls makes real calls with a token of each agent's
// ServiceAccount, as its pod has: what the agent does is allowed, reading
// Secrets elsewhere, writing nodes and RBAC are refused with 403.
func testForbiddenCalls(t *testing.T, env *testbed.Env) {
	ctx := context.Background()
	as := func(context, sa string) *kubernetes.Clientset {
		admin := kubernetes.NewForConfigOrDie(env.RESTConfig(t, context))
		tr, err := admin.CoreV1().ServiceAccounts(deployer.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token of %s in %s: %v", sa, context, err)
		}
		cfg := rest.AnonymousClientConfig(env.RESTConfig(t, context))
		cfg.BearerToken = tr.Status.Token
		return kubernetes.NewForConfigOrDie(cfg)
	}
	forbidden := func(who, what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %s: err = %v, want 403 Forbidden", who, what, err)
		}
	}
	for _, c := range []struct{ context, sa string }{
		{"cloud-1", "mlsysops-cluster-agent"},
		{"cloud-1", "mlsysops-node-agent"},
		{testbed.ContextHost, "mlsysops-continuum-agent"},
	} {
		cs := as(c.context, c.sa)
		who := c.sa + " in " + c.context
		_, err := cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		forbidden(who, "list Secrets in kube-system", err)
		n, err := cs.CoreV1().Nodes().Get(ctx, "cloud-1", metav1.GetOptions{})
		if err == nil {
			n.Labels["mlsysops-test"] = "x"
			_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		} else if c.context != "cloud-1" {
			n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mls-continuum"}}
			_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		}
		forbidden(who, "update a node", err)
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, rbacEscalation(c.sa), metav1.CreateOptions{})
		forbidden(who, "create a ClusterRoleBinding", err)
	}
	// What the cluster agent does is allowed: it reads the member's pods.
	if _, err := as("cloud-1", "mlsysops-cluster-agent").CoreV1().Pods(deployer.Namespace).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the cluster agent cannot list pods in its member: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// rbacEscalation binds cluster-admin to the agent's own account: what a
// compromised agent would try first.
func rbacEscalation(sa string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mlsysops-test-escalation"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: deployer.Namespace, Name: sa}},
	}
}

// testDescriptionReplaced replaces the ConfigMap node-system-descriptions
// in the Karmada API as `kubectl create configmap --from-file
// --dry-run=client -o yaml | kubectl apply -f -` would, with one node's
// description given a new label: Karmada carries it to the member, the
// kwoklet updates the mounted files as the kubelet does, and the node's
// agent (a kwoklet process) applies the label, which its cluster agent
// writes into the node's MLSysOpsNode, with no restart of the agent.
// The original ConfigMap is put back at the end.
func testDescriptionReplaced(t *testing.T, env *testbed.Env) {
	ctx := context.Background()
	const node, member, label = "far-edge-rpi-1", "edge-1", "zone:replaced"
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := deployer.ConfigMapFiles(filepath.Join(root, "descriptions", "nodes"))
	if err != nil {
		t.Fatal(err)
	}
	orig := files[node+".yaml"]
	if !strings.Contains(orig, `labels: ["node-type:rpi"]`) {
		t.Fatalf("descriptions/nodes/%s.yaml changed: the test edits its labels line", node)
	}
	edited := map[string]string{}
	for k, v := range files {
		edited[k] = v
	}
	edited[node+".yaml"] = strings.Replace(orig, `labels: ["node-type:rpi"]`, `labels: ["node-type:rpi", "`+label+`"]`, 1)

	karmada := kubernetes.NewForConfigOrDie(env.RESTConfig(t, testbed.ContextKarmada))
	replace := func(data map[string]string) {
		t.Helper()
		cm, err := karmada.CoreV1().ConfigMaps(deployer.Namespace).Get(ctx, "node-system-descriptions", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = data
		if _, err := karmada.CoreV1().ConfigMaps(deployer.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
	agentPod := func() *corev1.Pod {
		t.Helper()
		pods, err := cs.CoreV1().Pods(deployer.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/name=mlsysops-node-agent", FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) != 1 {
			t.Fatalf("node agent pods on %s: %d", node, len(pods.Items))
		}
		return &pods.Items[0]
	}
	before := agentPod()
	replace(edited)
	defer replace(files)
	start := time.Now()
	mc := karmadaClient(t, env, member)
	testbed.Eventually(t, "the new label in the MLSysOpsNode "+node, 3*time.Minute, func() error {
		var n mlsysopsv1.MLSysOpsNode
		if err := mc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: node}, &n); err != nil {
			return err
		}
		for _, l := range n.Spec.Labels {
			if l == label {
				return nil
			}
		}
		return fmt.Errorf("labels %v", n.Spec.Labels)
	})
	t.Logf("label %s reported %s after the ConfigMap was replaced", label, time.Since(start).Round(time.Second))
	after := agentPod()
	if after.UID != before.UID || after.Status.ContainerStatuses[0].RestartCount != before.Status.ContainerStatuses[0].RestartCount {
		t.Errorf("the node agent restarted: pod %s restarts %d, now pod %s restarts %d", before.UID,
			before.Status.ContainerStatuses[0].RestartCount, after.UID, after.Status.ContainerStatuses[0].RestartCount)
	}
}
