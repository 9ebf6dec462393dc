package testbed

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/resources"
)

// KWOKLabel marks the nodes the cluster's KWOK controller simulates. It is
// a label rather than KWOK's usual annotation because KWOK watches labels
// on the server side: removing the label makes KWOK drop the node at once,
// which is how tests make a node fail (its lease expires and the node
// lifecycle controller marks it NotReady).
const KWOKLabel = "kwok.x-k8s.io/node"

// nodeObjects returns the KWOK nodes of every member cluster, keyed by
// cluster: one per node description, with labels and capacity derived from
// it. The node named after its cluster hosts the cluster agent; a cluster
// without such a description gets a small control node of that name, so
// that its agent always has a host. Real nodes (realnode.go) are left out:
// their kubelets register them.
func (tb *Testbed) nodeObjects() (map[string][]*corev1.Node, error) {
	out := map[string][]*corev1.Node{}
	known := map[string]bool{}
	for _, c := range tb.clusters {
		known[c] = true
	}
	for _, n := range tb.set.Nodes {
		cluster := n.Spec.ClusterID
		if !known[cluster] {
			return nil, fmt.Errorf("node description %s: cluster_id %q has no file in clusters/", n.Name, cluster)
		}
		if isReal(tb.real, n.Name) {
			continue
		}
		out[cluster] = append(out[cluster], kwokNode(n.Name, cluster, resources.NodeLabels(n), resources.NodeCapacity(n)))
	}
	for _, c := range tb.clusters {
		hasControl := isReal(tb.real, c)
		for _, n := range out[c] {
			hasControl = hasControl || n.Name == c
		}
		if !hasControl {
			out[c] = append(out[c], kwokNode(c, c, map[string]string{
				mlsysopsv1.LabelHostname: c, mlsysopsv1.LabelArch: "amd64", mlsysopsv1.LabelKubeOS: "linux",
				mlsysopsv1.LabelCluster: c,
			}, corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
				corev1.ResourcePods: resource.MustParse("110"),
			}))
		}
		sort.Slice(out[c], func(i, j int) bool { return out[c][i].Name < out[c][j].Name })
	}
	return out, nil
}

func kwokNode(name, cluster string, labels map[string]string, capacity corev1.ResourceList) *corev1.Node {
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	l[KWOKLabel] = "fake"
	l[mlsysopsv1.LabelContinuumLayer] = mlsysopsv1.AgentLayerNode
	if name == cluster {
		l[mlsysopsv1.LabelContinuumLayer] = mlsysopsv1.AgentLayerCluster
	}
	arch := l[mlsysopsv1.LabelArch]
	if arch == "" {
		arch = "amd64"
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: l,
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture: arch, OperatingSystem: "linux",
				KubeletVersion: "v1.31.3-kwok", OSImage: "KWOK simulated node",
			},
			Phase: corev1.NodeRunning,
		},
	}
}

// createNodes makes each member cluster's KWOK nodes match the
// descriptions: creates missing ones, updates labels and capacity, deletes
// KWOK nodes no longer described, and waits until all are Ready.
func (tb *Testbed) createNodes(ctx context.Context) error {
	want, err := tb.nodeObjects()
	if err != nil {
		return err
	}
	for _, cluster := range tb.clusters {
		cfg, err := restConfig(tb.l.path("kubeconfig"), cluster)
		if err != nil {
			return err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		names := map[string]bool{}
		for _, n := range want[cluster] {
			names[n.Name] = true
		}
		if err := applyNodes(ctx, cs, want[cluster]); err != nil {
			return fmt.Errorf("cluster %s: %w", cluster, err)
		}
		existing, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range existing.Items {
			if n.Labels[KWOKLabel] != "" && !names[n.Name] {
				if err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
		}
		// What the NVIDIA GPU operator installs on real GPU clusters, so
		// pods asking for runtime class nvidia are admitted.
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "nvidia"}, Handler: "nvidia"}
		if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster %s: runtime class nvidia: %w", cluster, err)
		}
		if err := waitNodesReady(ctx, cs, names, tb.settings().nodesReadyTimeout); err != nil {
			return fmt.Errorf("cluster %s: %w (see logs/%s-kwok.log)", cluster, err, cluster)
		}
		tb.progress("%s Ready", "nodes of "+cluster, nodeList(want[cluster]))
	}
	return nil
}

func applyNode(ctx context.Context, cs kubernetes.Interface, want *corev1.Node) error {
	nodes := cs.CoreV1().Nodes()
	// KWOK and the node lifecycle controller write nodes all the time:
	// every attempt starts from a fresh read (apierrors.IsConflict sees
	// through the %w wrapping).
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := nodes.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Nodes accept their status on create.
			if _, err := nodes.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create node %s: %w", want.Name, err)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if labels := nodeLabels(cur.Labels, want.Labels); !equality.Semantic.DeepEqual(cur.Labels, labels) {
			cur.Labels = labels
			if cur, err = nodes.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update node %s: %w", want.Name, err)
			}
		}
		if !equality.Semantic.DeepEqual(cur.Status.Capacity, want.Status.Capacity) {
			cur.Status.Capacity = want.Status.Capacity
			cur.Status.Allocatable = want.Status.Allocatable
			if _, err := nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update node %s status: %w", want.Name, err)
			}
		}
		return nil
	})
}

// nodeLabels returns the labels a node should have: the wanted ones, and
// of the others only those the testbed does not own (the ones Kubernetes
// adds itself, such as beta.kubernetes.io/arch, stay; stale MLSysOps and
// GPU labels from an older description go). Replacing the whole map
// instead made every run fight the controller manager over its labels.
func nodeLabels(cur, want map[string]string) map[string]string {
	out := make(map[string]string, len(want))
	for k, v := range cur {
		if !strings.HasPrefix(k, mlsysopsv1.LabelPrefix) && !strings.HasPrefix(k, "nvidia.com/") {
			out[k] = v
		}
	}
	for k, v := range want {
		out[k] = v
	}
	return out
}

func waitNodesReady(ctx context.Context, cs kubernetes.Interface, names map[string]bool, timeout time.Duration) error {
	var notReady []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		// One list, not a read per node: clusters have thousands.
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: KWOKLabel})
		if err != nil {
			return false, nil
		}
		ready := map[string]bool{}
		for i := range list.Items {
			ready[list.Items[i].Name] = nodeReady(&list.Items[i])
		}
		notReady = notReady[:0]
		for name := range names {
			if !ready[name] {
				notReady = append(notReady, name)
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		sort.Strings(notReady)
		if len(notReady) > 20 {
			notReady = append(notReady[:20], fmt.Sprintf("and %d more", len(notReady)-20))
		}
		return fmt.Errorf("nodes not Ready: %s", strings.Join(notReady, ", "))
	}
	return nil
}

// applyNodes applies the nodes, several at a time: clusters of the scale
// profile have thousands.
func applyNodes(ctx context.Context, cs kubernetes.Interface, nodes []*corev1.Node) error {
	work := make(chan *corev1.Node)
	errs := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for range min(16, len(nodes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				errs <- applyNode(ctx, cs, n)
			}
		}()
	}
	for _, n := range nodes {
		work <- n
	}
	close(work)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		if err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// nodeList names nodes for progress lines, the first few of many.
func nodeList(nodes []*corev1.Node) string {
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if len(names) > 8 {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:8], ", "), len(names)-8)
	}
	return strings.Join(names, ", ")
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
