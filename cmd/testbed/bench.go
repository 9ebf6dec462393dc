package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/internal/images"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// benchPods is how many pods benchRealNodes starts, one after the other.
const benchPods = 5

// benchRealNodes reports each real node's time to Ready (from the cold
// up), the resident memory of its kubelet and containerd, pod create to
// Running on a real node, and each image's build time and size.
func benchRealNodes(ctx context.Context, tb *testbed.Testbed, env *testbed.Env, mem []testbed.ComponentMemory, times map[string]time.Duration) error {
	if len(env.RealNodes) == 0 {
		return nil
	}
	rss := map[string]float64{}
	for _, m := range mem {
		rss[m.Name] = float64(m.RSSBytes) / (1 << 20)
	}
	for _, n := range env.RealNodes {
		fmt.Printf("BenchmarkRealNode/node=%s \t1\t%.1f s-to-Ready\t%.1f kubelet-RSS-MiB\t%.1f containerd-RSS-MiB\t%.1f kube-proxy-RSS-MiB\n",
			n.Name, times[n.Name].Seconds(), rss["node-"+n.Name+"-kubelet"], rss["node-"+n.Name+"-containerd"], rss["node-"+n.Name+"-kube-proxy"])
	}

	node := env.RealNodes[len(env.RealNodes)-1]
	cfg, err := env.ClientConfig(node.Context)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	m, err := images.LoadManifest(tb.ImagesDir())
	if err != nil {
		return err
	}
	var took []time.Duration
	for i := 0; i < benchPods; i++ {
		d, err := podToRunning(ctx, cs, node.Name, m.Ref("pause"), fmt.Sprintf("bench-%d", i))
		if err != nil {
			return err
		}
		took = append(took, d)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	fmt.Printf("BenchmarkRealNodePod/node=%s \t%d\t%.2f s-create-to-Running-median\t%.2f s-create-to-Running-min\t%.2f s-create-to-Running-max\n",
		node.Name, benchPods, took[len(took)/2].Seconds(), took[0].Seconds(), took[len(took)-1].Seconds())

	root, err := testbed.RepoRoot()
	if err != nil {
		return err
	}
	built, err := images.Build(ctx, images.Options{Root: root})
	if err != nil {
		return err
	}
	for _, b := range built {
		fmt.Printf("BenchmarkImage/image=%s,platforms=%s \t1\t%.1f build-s\t%.1f size-MiB\n", b.Image.Name, strings.Join(b.Platforms, "+"), b.Duration.Seconds(), float64(b.SizeBytes)/(1<<20))
	}
	return nil
}

// podToRunning creates a pod of image on node and returns the time from
// the create call to the Running phase; the pod is deleted.
func podToRunning(ctx context.Context, cs kubernetes.Interface, node, image, name string) (time.Duration, error) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		NodeSelector:                  map[string]string{corev1.LabelHostname: node},
		Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		TerminationGracePeriodSeconds: new(int64),
		Containers:                    []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: corev1.PullNever}},
	}}
	start := time.Now()
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	defer cs.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pod %s on %s not Running\n", name, node)
		return 0, err
	}
	return time.Since(start), nil
}
