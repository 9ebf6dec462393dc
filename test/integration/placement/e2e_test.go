// Package placement_test runs the continuum and cluster agents' placement
// controllers against the testbed and follows applications from the Karmada
// API to running pods on the right nodes of the right member clusters.
package placement_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/cluster"
	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

type agents struct {
	env     *testbed.Env
	karmada client.Client
	// Stop stops these agents (and waits for them); it runs at cleanup
	// too.
	Stop func()

	continuum *continuum.Controllers
	clusters  map[string]*cluster.Controllers
	// processes are the agent processes (startProcessAgents); nil when
	// the controllers run in the test.
	processes *testbed.TestAgents
}

// startAgents runs the continuum controllers on Karmada and one cluster
// controller per member cluster, in this process, for the test.
func startAgents(t *testing.T) *agents { return startAgentsTB(t, nil) }

// startAgentsWith is startAgents with setup called on the controllers
// (the cluster ones by cluster name) before they start, to set hooks.
func startAgentsWith(t *testing.T, setup func(cc *continuum.Controllers, clusters map[string]*cluster.Controllers)) *agents {
	return startAgentsTB(t, setup)
}

func startAgentsTB(t testing.TB, setup func(cc *continuum.Controllers, clusters map[string]*cluster.Controllers)) *agents {
	t.Helper()
	env := testbed.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	var runs []func(context.Context) error
	cc, err := continuum.NewControllers(ctx, env.RESTConfig(t, testbed.ContextKarmada), nil, log.With("layer", "continuum"))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	runs = append(runs, cc.Start)
	a := &agents{env: env, continuum: cc}
	members := map[string]*cluster.Controllers{}
	for _, name := range env.Clusters {
		c, err := cluster.NewControllers(env.RESTConfig(t, name), name, log.With("layer", "cluster"))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		members[name] = c
		runs = append(runs, c.Start)
	}
	a.clusters = members
	if setup != nil {
		setup(cc, members)
	}
	done := make(chan error, len(runs))
	for _, run := range runs {
		go func() { done <- run(ctx) }()
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			for range runs {
				if err := <-done; err != nil {
					t.Errorf("controllers: %v", err)
				}
			}
		})
	}
	t.Cleanup(stop)
	scheme, _ := continuum.Scheme()
	kc, err := client.NewWithWatch(env.RESTConfig(t, testbed.ContextKarmada), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	a.karmada, a.Stop = kc, stop
	return a
}

// passed waits until these controllers have each completed a pass over
// the application since they started: the continuum's and those of the
// named clusters. A check made afterwards sees what they do given the
// chance, where a sleep would only hope they had it.
func (a *agents) passed(t *testing.T, app string, clusters ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		if a.continuum.Apps.LastPass(app) == "" {
			return false, nil
		}
		for _, c := range clusters {
			if a.clusters[c].Apps.LastPass(app) == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("no completed pass over %s by the continuum's controller and those of %v: %v", app, clusters, err)
	}
}

func (a *agents) member(t testing.TB, name string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(a.env.RESTConfig(t, name))
}

// submit creates an example application in the Karmada API under a fresh
// name and deletes it at the end of the test.
func (a *agents) submit(t *testing.T, example string) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "apps", example))
	if err != nil {
		t.Fatal(err)
	}
	app, errs := description.ParseApp(data, description.FormatYAML)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	app.Name = strings.TrimSuffix(example, ".yaml") + "-" + rand.String(4)
	app.Spec.Name = app.Name
	app.Namespace = mlsysopsv1.Namespace
	if err := a.karmada.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.karmada.Delete(context.Background(), app) })
	return app
}

func (a *agents) waitPhase(t *testing.T, name string, phase mlsysopsv1.AppPhase, within time.Duration) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	return a.waitStatus(t, name, string(phase), within, func(app *mlsysopsv1.MLSysOpsApp) bool { return app.Status.Phase == phase })
}

// waitStatus waits until the application in Karmada is as ok wants (what
// says what that is, for the failure).
func (a *agents) waitStatus(t *testing.T, name, what string, within time.Duration, ok func(*mlsysopsv1.MLSysOpsApp) bool) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	app := &mlsysopsv1.MLSysOpsApp{}
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		if err := a.karmada.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}, app); err != nil {
			return false, nil
		}
		return ok(app), nil
	})
	if err != nil {
		t.Fatalf("app %s never %s: last phase %s: %s; components %+v", name, what, app.Status.Phase, app.Status.Message, app.Status.Components)
	}
	return app
}

func runningPods(t *testing.T, cs kubernetes.Interface, app, comp string) []corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods(members.Namespace(app)).List(context.Background(), metav1.ListOptions{LabelSelector: mlsysopsv1.LabelComponent + "=" + comp})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// An app whose GPU component asks for a GPU model only one node of one
// cluster has lands exactly there, with nvidia.com/gpu requested, and is
// Running in Karmada; removing it removes everything it created.
func TestGPUAppLandsOnTheOnlyMatchingNode(t *testing.T) {
	a := startAgents(t)
	app := a.submit(t, "gpu-inference.yaml")
	got := a.waitPhase(t, app.Name, mlsysopsv1.AppRunning, 3*time.Minute)

	cloud := a.member(t, "cloud-1")
	pods := runningPods(t, cloud, app.Name, "llm-server")
	if len(pods) == 0 {
		t.Fatalf("no running llm-server pod in cloud-1; status %+v", got.Status)
	}
	for _, p := range pods {
		if p.Spec.NodeName != "cloud-gpu-h100-1" {
			t.Errorf("pod %s on %s, want cloud-gpu-h100-1", p.Name, p.Spec.NodeName)
		}
		if p.Spec.NodeName == "" || p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil {
			t.Errorf("pod %s is not placed through node affinity", p.Name)
		}
		gpu := p.Spec.Containers[0].Resources.Limits[mlsysopsv1.ResourceGPU]
		if gpu.Value() != 1 {
			t.Errorf("pod %s asks for %s GPUs, want 1", p.Name, gpu.String())
		}
	}
	var comp *mlsysopsv1.ComponentStatus
	for i := range got.Status.Components {
		if got.Status.Components[i].Name == "llm-server" {
			comp = &got.Status.Components[i]
		}
	}
	if comp == nil || comp.Cluster != "cloud-1" || len(comp.Nodes) != 1 || comp.Nodes[0] != "cloud-gpu-h100-1" || comp.ReadyReplicas < 1 {
		t.Errorf("Karmada status of llm-server = %+v, want cloud-1 / cloud-gpu-h100-1 ready", comp)
	}

	// Removal leaves nothing behind: the member namespace, the member CR
	// and the propagation policy go.
	if err := a.karmada.Delete(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cloud.CoreV1().Namespaces().Get(ctx, members.Namespace(app.Name), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("namespace %s still in cloud-1 after removal", members.Namespace(app.Name))
	}
}

// An edge arm64 component lands on an edge arm64 node.
func TestEdgeArm64Component(t *testing.T) {
	a := startAgents(t)
	app := a.submit(t, "edge-camera-arm64.yaml")
	a.waitPhase(t, app.Name, mlsysopsv1.AppRunning, 3*time.Minute)
	edge := a.member(t, "edge-1")
	nodes, err := edge.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	arch := map[string]string{}
	layer := map[string]string{}
	for _, n := range nodes.Items {
		arch[n.Name], layer[n.Name] = n.Labels[mlsysopsv1.LabelArch], n.Labels[mlsysopsv1.LabelLayer]
	}
	pods := runningPods(t, edge, app.Name, "detector")
	if len(pods) == 0 {
		t.Fatal("no running detector pod in edge-1")
	}
	for _, p := range pods {
		if arch[p.Spec.NodeName] != "arm64" || layer[p.Spec.NodeName] != "far_edge" {
			t.Errorf("detector on %s (%s, %s), want an arm64 far_edge node", p.Spec.NodeName, arch[p.Spec.NodeName], layer[p.Spec.NodeName])
		}
	}
}
