package placement_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mlsysops-go/mlsysops/agents/cluster"
	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// A component kube-scheduler cannot place on the node the controller
// chose (a pod the controller does not count holds the host port it
// needs) is reported with the scheduler's reason while no other node
// fits, and is placed on another node as soon as one does.
func TestUnschedulableComponentIsPlacedAgain(t *testing.T) {
	a := startAgentsWith(t, func(_ *continuum.Controllers, clusters map[string]*cluster.Controllers) {
		clusters["cloud-1"].Apps.PendingSettle = 2 * time.Second
	})
	cloud := a.member(t, "cloud-1")
	tag := rand.String(6)
	first, second := "pend-a-"+tag, "pend-b-"+tag
	tempNodes(t, cloud, tag, first)

	const hostPort = 18080
	blocker := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "blocker-" + tag, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: first, Containers: []corev1.Container{{
			Name: "blocker", Image: "registry.example/blocker:1",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: hostPort}},
		}}},
	}
	if _, err := cloud.CoreV1().Pods("default").Create(context.Background(), blocker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cloud.CoreV1().Pods("default").Delete(context.Background(), blocker.Name, *metav1.NewDeleteOptions(0))
	})

	app := taggedApp("pend-"+tag, tag)
	app.Spec.Components[0].Containers[0].Ports = []mlsysopsv1.ContainerPort{{ContainerPort: 8080, HostPort: hostPort}}
	if err := a.karmada.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.karmada.Delete(context.Background(), app) })

	// Only first fits as far as the controller knows; kube-scheduler
	// finds its port taken.
	a.waitStatus(t, app.Name, "reporting the scheduler's reason", 2*time.Minute, func(got *mlsysopsv1.MLSysOpsApp) bool {
		st := componentStatus(got, "worker")
		return st != nil && strings.Contains(st.Message, "node(s) could not take a replica (kube-scheduler: ") &&
			strings.Contains(st.Message, "free ports")
	})
	if pods := runningPods(t, cloud, app.Name, "worker"); len(pods) != 0 {
		t.Fatalf("worker running on %v beside the blocker", names(pods))
	}

	// Another node comes: the worker goes there, and only there.
	tempNodes(t, cloud, tag, second)
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		pods := runningPods(t, cloud, app.Name, "worker")
		return len(pods) == 1 && pods[0].Spec.NodeName == second && len(nodesOf(t, cloud, app.Name, "worker")) == 1, nil
	})
	if err != nil {
		t.Fatalf("worker never ran on %s alone: running %v, pods on %v", second, names(runningPods(t, cloud, app.Name, "worker")), nodesOf(t, cloud, app.Name, "worker"))
	}
	got := a.waitPhase(t, app.Name, mlsysopsv1.AppRunning, time.Minute)
	if st := componentStatus(got, "worker"); st == nil || len(st.Nodes) != 1 || st.Nodes[0] != second || st.Message != "" {
		t.Errorf("worker status %+v, want on %s without a message", st, second)
	}
}
