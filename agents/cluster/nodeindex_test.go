package cluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// The feed keeps the index in step with the informers, through adds,
// updates and deletes, and says when it has everything listed at start.
func TestIndexFeedFollowsInformers(t *testing.T) {
	n1 := node("n1", true)
	n1.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("10")}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	cs := fake.NewClientset(n1, pod)
	f := informers.NewSharedInformerFactory(cs, 0)
	changes := make(chan struct{}, 100)
	feed := &indexFeed{index: placement.NewIndex(), changed: func() { changes <- struct{}{} }}
	if feed.synced() {
		t.Fatal("synced before any handler")
	}
	if err := feed.feed(f.Core().V1().Nodes().Informer(), f.Core().V1().Pods().Informer(), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	defer f.Shutdown() // after cancel: it waits for the informers to stop
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), feed.synced) {
		t.Fatal("never synced")
	}
	requested := func() string {
		q := feed.index.Nodes()[0].Requested[corev1.ResourceCPU]
		return q.String()
	}
	if feed.index.Len() != 1 || requested() != "1" {
		t.Fatalf("after sync: %d nodes, %s cpu requested", feed.index.Len(), requested())
	}
	if err := cs.CoreV1().Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for feed.index.Len() != 0 || feed.index.LivePods("n1", "", "") != 0 {
		select {
		case <-changes:
		case <-deadline:
			t.Fatalf("node and pod still indexed: %d nodes", feed.index.Len())
		}
	}
}
