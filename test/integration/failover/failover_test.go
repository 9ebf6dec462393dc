// Package failover_test runs the real agent processes on the shared
// testbed (the continuum agent, a cluster agent per member cluster, a node
// agent per node), kills them in the middle of deployments and stops a
// whole member cluster, and checks that exactly the desired set of
// workloads runs afterwards.
package failover_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/kube"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// grace is the agents' child grace period in these tests.
const grace = 10 * time.Second

type world struct {
	env     *testbed.Env
	agents  *testbed.TestAgents
	karmada client.Client
	members map[string]kubernetes.Interface
	// memberApps reads the MLSysOpsApps Karmada propagated to each member.
	memberApps map[string]client.Client
}

func start(t *testing.T) *world {
	t.Helper()
	return startWith(t, 0, nil)
}

// startWith runs the agents of every layer, the continuum and cluster
// agents as that many replicas each (with replicaArgs) when replicas is
// above 1, and the clients of the APIs the tests read.
func startWith(t testing.TB, replicas int, replicaArgs []string) *world {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	env := testbed.Shared(t)
	w := &world{env: env, members: map[string]kubernetes.Interface{}, memberApps: map[string]client.Client{}}
	w.agents = testbed.StartTestAgents(t, env, testbed.TestAgentsOptions{
		Nodes:    true,
		Args:     []string{"--child-grace-period", grace.String(), "--capacity-report-interval", "5s"},
		Replicas: replicas, ReplicaArgs: replicaArgs,
	})
	scheme, err := continuum.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if w.karmada, err = client.New(env.RESTConfig(t, testbed.ContextKarmada), client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	for _, c := range env.Clusters {
		w.members[c] = kubernetes.NewForConfigOrDie(env.RESTConfig(t, c))
		if w.memberApps[c], err = client.New(env.RESTConfig(t, c), client.Options{Scheme: scheme}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// app reads an example application and gives it a fresh name.
func app(t *testing.T, example, prefix string) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "apps", example))
	if err != nil {
		t.Fatal(err)
	}
	a, errs := description.ParseApp(data, description.FormatYAML)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	a.Name = prefix + "-" + rand.String(5)
	a.Spec.Name = a.Name
	a.Namespace = mlsysopsv1.Namespace
	return a
}

func (w *world) create(t *testing.T, a *mlsysopsv1.MLSysOpsApp) {
	t.Helper()
	if err := w.karmada.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.karmada.Delete(context.Background(), a) })
}

// poll calls cond every interval until it returns nil or within passes.
func poll(t testing.TB, what string, interval, within time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	testbed.Poll(t, what, interval, within, cond)
}

func (w *world) get(ctx context.Context, name string) (*mlsysopsv1.MLSysOpsApp, error) {
	a := &mlsysopsv1.MLSysOpsApp{}
	return a, w.karmada.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}, a)
}

func (w *world) waitPhase(t *testing.T, name string, phase mlsysopsv1.AppPhase, within time.Duration) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	var got *mlsysopsv1.MLSysOpsApp
	poll(t, name+" "+string(phase), 500*time.Millisecond, within, func(ctx context.Context) error {
		a, err := w.get(ctx, name)
		if err != nil {
			return err
		}
		got = a
		if a.Status.Phase != phase {
			return fmt.Errorf("phase %s: %s", a.Status.Phase, a.Status.Message)
		}
		return nil
	})
	return got
}

// desired checks that an application runs exactly as described on
// exactly one cluster: its binding placed on that cluster alone, one
// Deployment per component with all its replicas running and no other
// pods, and nothing of it in the other clusters.
func (w *world) desired(ctx context.Context, a *mlsysopsv1.MLSysOpsApp, on string) error {
	placed, err := w.placed(ctx, a.Name)
	if err != nil {
		return err
	}
	if !slices.Equal(placed, []string{on}) {
		return fmt.Errorf("the binding places it on %v, want [%s]", placed, on)
	}
	ns := members.Namespace(a.Name)
	for name, cs := range w.members {
		deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if name != on {
			if len(deps.Items)+len(pods.Items) > 0 {
				return fmt.Errorf("%s hosts %d Deployments and %d pods of the app, want none", name, len(deps.Items), len(pods.Items))
			}
			continue
		}
		var got []string
		for _, d := range deps.Items {
			got = append(got, d.Labels[mlsysopsv1.LabelComponent])
		}
		sort.Strings(got)
		var want []string
		for _, c := range a.Spec.Components {
			want = append(want, c.Metadata.Name)
		}
		sort.Strings(want)
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s: Deployments of components %v, want %v", name, got, want)
		}
		running := map[string]int{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("%s: pod %s still terminating", name, p.Name)
			}
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("%s: pod %s is %s", name, p.Name, p.Status.Phase)
			}
			running[p.Labels[mlsysopsv1.LabelComponent]]++
		}
		for _, d := range deps.Items {
			comp := d.Labels[mlsysopsv1.LabelComponent]
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			if int32(running[comp]) != want {
				return fmt.Errorf("%s: %d running pods of %s, want %d", name, running[comp], comp, want)
			}
		}
	}
	return nil
}

// placed returns the clusters the continuum placed application name on,
// as its Works or binding record them (none before it is placed).
func (w *world) placed(ctx context.Context, name string) ([]string, error) {
	clusters, _, err := continuum.Placement(ctx, w.karmada, name)
	return clusters, err
}

// gone checks that nothing of the application is left anywhere.
func (w *world) gone(ctx context.Context, name string) error {
	if _, err := w.get(ctx, name); !apierrors.IsNotFound(err) {
		return fmt.Errorf("MLSysOpsApp still in Karmada (%v)", err)
	}
	if _, found, err := continuum.Placement(ctx, w.karmada, name); err != nil || found {
		return fmt.Errorf("its ResourceBinding or Works still in Karmada (%v)", err)
	}
	for c, cs := range w.members {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, members.Namespace(name), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s still in %s (%v)", members.Namespace(name), c, err)
		}
	}
	return nil
}

func (w *world) remove(t *testing.T, a *mlsysopsv1.MLSysOpsApp) {
	t.Helper()
	if err := w.karmada.Delete(context.Background(), a); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	poll(t, a.Name+" removed everywhere", time.Second, 3*time.Minute, func(ctx context.Context) error { return w.gone(ctx, a.Name) })
}

// finished says whether the application's deployment is over: its status
// says Running, or exactly the desired set runs already.
func (w *world) finished(ctx context.Context, a *mlsysopsv1.MLSysOpsApp, on string) (bool, string) {
	got, err := w.get(ctx, a.Name)
	if err == nil && got.Status.Phase == mlsysopsv1.AppRunning {
		return true, "the application is Running"
	}
	if err := w.desired(ctx, a, on); err == nil {
		return true, "exactly the desired set runs"
	}
	return false, ""
}

// generations returns the generation of each Deployment of the
// application in cluster: a rewrite by an agent changes it at once, before
// any pod follows.
func (w *world) generations(t *testing.T, a *mlsysopsv1.MLSysOpsApp, cluster string) map[string]int64 {
	t.Helper()
	deps, err := w.members[cluster].AppsV1().Deployments(members.Namespace(a.Name)).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, d := range deps.Items {
		out[d.Name] = d.Generation
	}
	return out
}

// reconciled reads which version of each application an agent's
// controller last completed a pass over (its /status).
func (w *world) reconciled(ctx context.Context, layer, name string) (map[string]string, error) {
	var st struct {
		Reconciled map[string]string `json:"reconciled"`
	}
	err := testbed.GetJSON(ctx, w.agents.Get(layer, name).URL()+"/status", &st)
	return st.Reconciled, err
}

// pokeAnnotation is an annotation no agent acts on: changing it makes a
// new version of the application that the controllers reconcile.
const pokeAnnotation = "test.mlsysops.eu/poke"

// acted waits until the continuum agent and the cluster agent of cluster
// have each completed a reconcile of the application that began after
// this call: it gives the application a new version (an annotation no
// agent acts on) and waits for a pass over that version, in Karmada for
// the continuum agent and in the member cluster for the cluster agent.
// A check made afterwards sees what the agents do given the chance, where
// a sleep would only hope they had it.
func (w *world) acted(t *testing.T, a *mlsysopsv1.MLSysOpsApp, cluster string) {
	t.Helper()
	token := strconv.FormatInt(time.Now().UnixNano(), 10)
	patch := []byte(`{"metadata":{"annotations":{"` + pokeAnnotation + `":"` + token + `"}}}`)
	cur := &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name}}
	if err := w.karmada.Patch(context.Background(), cur, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	poll(t, "the continuum agent's pass over version "+cur.ResourceVersion, time.Second, 2*time.Minute, func(ctx context.Context) error {
		passes, err := w.reconciled(ctx, testbed.LayerContinuum, "mls-continuum")
		if err != nil {
			return err
		}
		if rv := passes[a.Name]; !kube.SameOrNewer(rv, cur.ResourceVersion) {
			return fmt.Errorf("last pass over version %q", rv)
		}
		return nil
	})
	var memberRV string
	poll(t, "the new version in "+cluster, time.Second, 2*time.Minute, func(ctx context.Context) error {
		m := &mlsysopsv1.MLSysOpsApp{}
		if err := w.memberApps[cluster].Get(ctx, client.ObjectKeyFromObject(a), m); err != nil {
			return err
		}
		if m.Annotations[pokeAnnotation] != token {
			return fmt.Errorf("annotation %q", m.Annotations[pokeAnnotation])
		}
		memberRV = m.ResourceVersion
		return nil
	})
	poll(t, "the cluster agent's pass over version "+memberRV, time.Second, 2*time.Minute, func(ctx context.Context) error {
		passes, err := w.reconciled(ctx, testbed.LayerCluster, cluster)
		if err != nil {
			return err
		}
		if rv := passes[a.Name]; !kube.SameOrNewer(rv, memberRV) {
			return fmt.Errorf("last pass over version %q", rv)
		}
		return nil
	})
}

// Each agent killed with SIGKILL in the middle of a deployment and started
// again leaves exactly the desired set: no duplicate Deployment, no pod
// left behind, nothing in the other cluster; removal then leaves nothing.
//
// A kill that lands after the deployment finished would prove nothing:
// such a run is done again with a new application, and the test fails
// when no kill lands in time.
func TestAgentKilledMidDeployment(t *testing.T) {
	w := start(t)
	cases := []struct {
		victim  string // layer/name
		example string
		cluster string
		// midway reports that the deployment is under way: the moment to
		// kill.
		midway func(ctx context.Context, a *mlsysopsv1.MLSysOpsApp) bool
	}{
		{
			victim: testbed.LayerContinuum + "/mls-continuum", example: "gpu-inference.yaml", cluster: "cloud-1",
			// The continuum has chosen the cluster and written it on the
			// binding; Karmada has not propagated yet.
			midway: func(ctx context.Context, a *mlsysopsv1.MLSysOpsApp) bool {
				placed, err := w.placed(ctx, a.Name)
				return err == nil && len(placed) > 0
			},
		},
		{
			victim: testbed.LayerCluster + "/cloud-1", example: "gpu-inference.yaml", cluster: "cloud-1",
			// The first component's Deployment exists; the one that depends
			// on it does not yet.
			midway: func(ctx context.Context, a *mlsysopsv1.MLSysOpsApp) bool {
				deps, err := w.members["cloud-1"].AppsV1().Deployments(members.Namespace(a.Name)).List(ctx, metav1.ListOptions{})
				return err == nil && len(deps.Items) > 0
			},
		},
		{
			victim: testbed.LayerCluster + "/edge-1", example: "edge-camera-arm64.yaml", cluster: "edge-1",
			midway: func(ctx context.Context, a *mlsysopsv1.MLSysOpsApp) bool {
				_, err := w.members["edge-1"].CoreV1().Namespaces().Get(ctx, members.Namespace(a.Name), metav1.GetOptions{})
				return err == nil
			},
		},
		{
			victim: testbed.LayerNode + "/cloud-gpu-h100-1", example: "gpu-inference.yaml", cluster: "cloud-1",
			// The application is placed on the cluster; its components
			// land on the node while the node agent is down. (Killed once
			// the Deployments exist, the node agent mostly died after
			// KWOK had run every pod.)
			midway: func(ctx context.Context, a *mlsysopsv1.MLSysOpsApp) bool {
				placed, err := w.placed(ctx, a.Name)
				return err == nil && len(placed) > 0
			},
		},
	}
	const attempts = 3
	for _, tc := range cases {
		layer, name, _ := strings.Cut(tc.victim, "/")
		t.Run(strings.ReplaceAll(tc.victim, "/", "-"), func(t *testing.T) {
			var a *mlsysopsv1.MLSysOpsApp
			for attempt := 1; ; attempt++ {
				a = app(t, tc.example, "kill-"+layer)
				w.create(t, a)
				poll(t, "deployment under way", 20*time.Millisecond, 2*time.Minute, func(ctx context.Context) error {
					if tc.midway(ctx, a) {
						return nil
					}
					return fmt.Errorf("not yet")
				})
				w.agents.Kill(layer, name)
				// Checked once the agent is dead: what it had not finished
				// then, it did not finish before dying.
				done, why := w.finished(context.Background(), a, tc.cluster)
				if !done {
					got, err := w.get(context.Background(), a.Name)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("killed %s mid-deployment (attempt %d), the app %s: %s", tc.victim, attempt, got.Status.Phase, got.Status.Message)
					break
				}
				w.agents.Start(layer, name)
				w.remove(t, a)
				if attempt == attempts {
					t.Fatalf("the kill of %s landed after the deployment had finished (%s) in %d attempts: no kill mid-deployment to test", tc.victim, why, attempts)
				}
				t.Logf("attempt %d: the kill of %s landed after the deployment had finished (%s); again with a new application", attempt, tc.victim, why)
			}
			// The agent stays down a while: the others go on without it.
			time.Sleep(2 * time.Second)
			w.agents.Start(layer, name)
			w.waitPhase(t, a.Name, mlsysopsv1.AppRunning, 3*time.Minute)
			poll(t, "exactly the desired set", time.Second, 2*time.Minute, func(ctx context.Context) error { return w.desired(ctx, a, tc.cluster) })
			// And it stays so: once the restarted agents have acted on
			// the application again, nothing changed.
			before := w.generations(t, a, tc.cluster)
			w.acted(t, a, tc.cluster)
			if err := w.desired(context.Background(), a, tc.cluster); err != nil {
				t.Fatalf("after the agents acted again: %v", err)
			}
			if diff := cmp.Diff(before, w.generations(t, a, tc.cluster)); diff != "" {
				t.Errorf("the agents rewrote Deployments of a running application (-before +after):\n%s", diff)
			}
			w.remove(t, a)
		})
	}
}

// A member cluster that goes away (its API server, controllers, nodes and
// cluster agent all stopped) has its applications re-placed on the other
// eligible cluster; when it comes back it is cleaned up and the
// application stays where it moved.
func TestMemberClusterStopped(t *testing.T) {
	w := start(t)
	a := app(t, "gpu-inference.yaml", "cstop")
	// Any cluster will do: a small CPU-only component.
	a.Spec.ClusterPlacement = nil
	a.Spec.Components = a.Spec.Components[1:] // the gateway
	a.Spec.Components[0].DependsOn = nil
	w.create(t, a)
	got := w.waitPhase(t, a.Name, mlsysopsv1.AppRunning, 3*time.Minute)
	if len(got.Status.Components) != 1 {
		t.Fatalf("components %+v", got.Status.Components)
	}
	first := got.Status.Components[0].Cluster
	second := "cloud-1"
	if first == "cloud-1" {
		second = "edge-1"
	}
	t.Logf("running on %s; stopping %s", first, first)
	// The cluster agent runs in its cluster: it goes with it.
	stopped := time.Now()
	testbed.StopSharedCluster(t, first)
	w.agents.Kill(testbed.LayerCluster, first)
	poll(t, "app re-placed on "+second, time.Second, 4*time.Minute, func(ctx context.Context) error {
		deps, err := w.members[second].AppsV1().Deployments(members.Namespace(a.Name)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(deps.Items) != 1 || deps.Items[0].Status.ReadyReplicas != 1 {
			return fmt.Errorf("%d Deployments in %s", len(deps.Items), second)
		}
		return nil
	})
	t.Logf("re-placed on %s %s after the cluster stopped", second, time.Since(stopped).Round(time.Second))
	got = w.waitPhase(t, a.Name, mlsysopsv1.AppRunning, 2*time.Minute)
	if len(got.Status.Components) != 1 || got.Status.Components[0].Cluster != second {
		t.Errorf("status components %+v, want one on %s", got.Status.Components, second)
	}

	// The cluster comes back with its agent: what it still held goes,
	// the application stays where it is.
	testbed.RestoreShared(t)
	w.agents.Start(testbed.LayerCluster, first)
	poll(t, "exactly the desired set on "+second, time.Second, 4*time.Minute, func(ctx context.Context) error { return w.desired(ctx, a, second) })
	w.remove(t, a)
}

// Every cluster agent reports its capacity to the continuum agent, which
// keeps it for placement.
func TestCapacityReports(t *testing.T) {
	w := start(t)
	cont := w.agents.Get(testbed.LayerContinuum, "mls-continuum")
	poll(t, "fresh capacity reports from every cluster", time.Second, time.Minute, func(ctx context.Context) error {
		var st struct {
			CapacityReports map[string]struct {
				Fresh       bool                      `json:"fresh"`
				ReadyNodes  int                       `json:"ready_nodes"`
				NodesListed int                       `json:"nodes_listed"`
				GPUs        map[string]map[string]any `json:"gpus"`
			} `json:"capacity_reports"`
		}
		if err := testbed.GetJSON(ctx, cont.URL()+"/status", &st); err != nil {
			return err
		}
		for _, c := range w.env.Clusters {
			r, ok := st.CapacityReports[c]
			if !ok || !r.Fresh || r.ReadyNodes == 0 || r.NodesListed < r.ReadyNodes {
				return fmt.Errorf("report of %s: %+v (present %v)", c, r, ok)
			}
		}
		if _, ok := st.CapacityReports["cloud-1"].GPUs["NVIDIA-H100-80GB-HBM3"]; !ok {
			return fmt.Errorf("cloud-1 reports no H100: %v", st.CapacityReports["cloud-1"].GPUs)
		}
		return nil
	})
}

// A node whose node agent is gone past the grace period (the Kubernetes
// node itself still Ready) has its components moved to another eligible
// node; the agent coming back does not move them again.
func TestNodeAgentGoneMovesComponents(t *testing.T) {
	w := start(t)
	a := app(t, "gpu-inference.yaml", "nagent")
	a.Spec.Components = a.Spec.Components[1:] // the CPU-only gateway
	a.Spec.Components[0].DependsOn = nil
	w.create(t, a)
	got := w.waitPhase(t, a.Name, mlsysopsv1.AppRunning, 3*time.Minute)
	if len(got.Status.Components) != 1 || len(got.Status.Components[0].Nodes) != 1 {
		t.Fatalf("components %+v", got.Status.Components)
	}
	victim := got.Status.Components[0].Nodes[0]
	t.Logf("gateway runs on %s; killing its node agent", victim)
	w.agents.Kill(testbed.LayerNode, victim)
	killed := time.Now()
	var now string
	poll(t, "gateway moved off "+victim, time.Second, 3*time.Minute, func(ctx context.Context) error {
		got, err := w.get(ctx, a.Name)
		if err != nil {
			return err
		}
		cs := got.Status.Components
		if got.Status.Phase != mlsysopsv1.AppRunning || len(cs) != 1 || len(cs[0].Nodes) != 1 || cs[0].Nodes[0] == victim {
			return fmt.Errorf("phase %s, components %+v", got.Status.Phase, cs)
		}
		now = cs[0].Nodes[0]
		return nil
	})
	t.Logf("moved to %s %s after the agent was killed (grace %s)", now, time.Since(killed).Round(time.Second), grace)
	if elapsed := time.Since(killed); elapsed < grace {
		t.Errorf("moved after %s, before the grace period", elapsed)
	}
	poll(t, "exactly the desired set", time.Second, 2*time.Minute, func(ctx context.Context) error { return w.desired(ctx, a, "cloud-1") })
	pods, err := w.members["cloud-1"].CoreV1().Pods(members.Namespace(a.Name)).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == victim {
			t.Errorf("pod %s still on %s", p.Name, victim)
		}
	}

	before := w.generations(t, a, "cloud-1")
	w.agents.Start(testbed.LayerNode, victim)
	// The cluster agent sees the node agent back, takes the node off its
	// gone list and acts on the application again: only then can the
	// check below tell that it moves nothing.
	poll(t, "the cluster agent seeing "+victim+" back", time.Second, 2*time.Minute, func(ctx context.Context) error {
		var st struct {
			Nodes map[string]struct {
				Online bool `json:"online"`
			} `json:"nodes"`
			Gone []string `json:"nodes_gone"`
		}
		if err := testbed.GetJSON(ctx, w.agents.Get(testbed.LayerCluster, "cloud-1").URL()+"/status", &st); err != nil {
			return err
		}
		if !st.Nodes[victim].Online || slices.Contains(st.Gone, victim) {
			return fmt.Errorf("online %v, gone %v", st.Nodes[victim].Online, st.Gone)
		}
		return nil
	})
	w.acted(t, a, "cloud-1")
	if diff := cmp.Diff(before, w.generations(t, a, "cloud-1")); diff != "" {
		t.Errorf("after the agent came back the cluster agent rewrote the Deployment (-before +after):\n%s", diff)
	}
	got, err = w.get(context.Background(), a.Name)
	if err != nil {
		t.Fatal(err)
	}
	if cs := got.Status.Components; len(cs) != 1 || len(cs[0].Nodes) != 1 || cs[0].Nodes[0] != now {
		t.Errorf("after the agent came back the gateway moved again: %+v", cs)
	}
	w.remove(t, a)
}
