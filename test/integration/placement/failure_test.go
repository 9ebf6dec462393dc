package placement_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// tempNodes adds KWOK nodes to a member cluster for one test, labelled so
// that only the test's application selects them, and deletes them after.
func tempNodes(t *testing.T, cs kubernetes.Interface, tag string, names ...string) {
	t.Helper()
	for _, n := range names {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{
				testbed.KWOKLabel:        "fake",
				mlsysopsv1.LabelHostname: n, mlsysopsv1.LabelArch: "amd64", mlsysopsv1.LabelKubeOS: "linux",
				mlsysopsv1.LabelLayer: "cloud", mlsysopsv1.LabelUserPrefix + "test": tag,
			}},
			Status: corev1.NodeStatus{
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
			},
		}
		if _, err := cs.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}
	err := wait.PollUntilContextTimeout(context.Background(), 300*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			node, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil || !isReady(node) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("temporary nodes not Ready: %v", err)
	}
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func taggedApp(name, tag string) *mlsysopsv1.MLSysOpsApp {
	cpu := resource.MustParse("500m")
	return &mlsysopsv1.MLSysOpsApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace},
		Spec: mlsysopsv1.MLSysOpsAppSpec{
			Name:             name,
			ClusterPlacement: &mlsysopsv1.ClusterPlacement{ClusterID: []string{"cloud-1"}},
			Components: []mlsysopsv1.Component{{
				Metadata:      mlsysopsv1.ComponentMetadata{Name: "worker"},
				NodePlacement: &mlsysopsv1.NodePlacement{Labels: []string{"test:" + tag}},
				Containers: []mlsysopsv1.Container{{Image: "registry.example/worker:1", PlatformRequirements: &mlsysopsv1.PlatformRequirements{
					CPU: &mlsysopsv1.CPURequirements{Requests: &cpu},
				}}},
			}},
		},
	}
}

// A node that goes NotReady has its components moved to another eligible
// node; restarting every agent afterwards changes nothing.
func TestNodeFailureMovesComponentsAndRestartKeepsThem(t *testing.T) {
	a := startAgents(t)
	cloud := a.member(t, "cloud-1")
	tag := rand.String(6)
	first, second := "fail-a-"+tag, "fail-b-"+tag
	tempNodes(t, cloud, tag, first, second)

	app := taggedApp("move-"+tag, tag)
	if err := a.karmada.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.karmada.Delete(context.Background(), app) })
	a.waitPhase(t, app.Name, mlsysopsv1.AppRunning, 2*time.Minute)
	pods := runningPods(t, cloud, app.Name, "worker")
	if len(pods) != 1 {
		t.Fatalf("%d running worker pods, want 1", len(pods))
	}
	victim := pods[0].Spec.NodeName
	other := first
	if victim == first {
		other = second
	}

	// The node stops answering: KWOK no longer renews its lease and the
	// node lifecycle controller marks it NotReady.
	patch := []byte(`{"metadata":{"labels":{"` + testbed.KWOKLabel + `":null}}}`)
	if _, err := cloud.CoreV1().Nodes().Patch(context.Background(), victim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, p := range runningPods(t, cloud, app.Name, "worker") {
			if p.Spec.NodeName == other {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("worker never moved from failed node %s to %s", victim, other)
	}
	a.waitPhase(t, app.Name, mlsysopsv1.AppRunning, 2*time.Minute)
	// The old pod goes once the new one is ready (make before break).
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return len(runningPods(t, cloud, app.Name, "worker")) == 1, nil
	})
	if err != nil {
		t.Fatalf("old worker pod never went: %v", names(runningPods(t, cloud, app.Name, "worker")))
	}

	// Restart: a fresh set of agents finds everything in place and leaves
	// the running pod and the Deployment alone.
	before := runningPods(t, cloud, app.Name, "worker")
	dep, err := cloud.AppsV1().Deployments(members.Namespace(app.Name)).Get(context.Background(), "worker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Stop()
	b := startAgents(t)
	b.passed(t, app.Name, "cloud-1")
	b.waitPhase(t, app.Name, mlsysopsv1.AppRunning, time.Minute)
	after := runningPods(t, cloud, app.Name, "worker")
	if len(after) != 1 || len(before) != 1 || after[0].UID != before[0].UID {
		t.Errorf("restart changed the pods: before %v, after %v", names(before), names(after))
	}
	dep2, err := cloud.AppsV1().Deployments(members.Namespace(app.Name)).Get(context.Background(), "worker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep2.Generation != dep.Generation {
		t.Errorf("restart rewrote the Deployment: generation %d → %d", dep.Generation, dep2.Generation)
	}
	list, err := cloud.AppsV1().Deployments(members.Namespace(app.Name)).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("deployments after restart: %d (%v), want 1", len(list.Items), err)
	}
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"@"+p.Spec.NodeName)
	}
	return out
}

// A member cluster that goes away has its applications placed again on the
// other eligible cluster: the placement decision is unit-tested with the
// cluster reported down (TestReconcileMovesAppOffClusterReportedDown,
// agents/continuum), and a real member cluster stopped under the real
// agent processes in TestMemberClusterStopped (test/integration/failover).
