// Package testbed_test checks the local continuum itself: Karmada sees every
// member cluster Ready, the KWOK nodes carry what their descriptions say,
// and Karmada-propagated GPU workloads are placed and accounted by the
// member's real kube-scheduler.
package testbed_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

func TestClustersReadyAndNodesDescribed(t *testing.T) {
	env := testbed.Shared(t)
	ctx := context.Background()
	kc := karmadaclientset.NewForConfigOrDie(env.RESTConfig(t, testbed.ContextKarmada))
	list, err := kc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, c := range list.Items {
		if c.Spec.SyncMode != clusterv1alpha1.Push {
			t.Errorf("cluster %s: sync mode %s, want Push", c.Name, c.Spec.SyncMode)
		}
		ready[c.Name] = meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	}
	for _, name := range []string{"cloud-1", "edge-1"} {
		if !ready[name] {
			t.Errorf("cluster %s not Ready in Karmada (clusters: %v)", name, ready)
		}
	}

	cases := map[string]struct {
		cluster, node string
		labels        map[string]string
		gpus          int64
	}{
		"H100 server": {"cloud-1", "cloud-gpu-h100-1", map[string]string{
			mlsysopsv1.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", mlsysopsv1.LabelGPUMemory: "81920",
			mlsysopsv1.LabelArch: "amd64", mlsysopsv1.LabelLayer: "cloud", mlsysopsv1.LabelContinuumLayer: "node",
		}, 8},
		"cluster agent host": {"cloud-1", "cloud-1", map[string]string{mlsysopsv1.LabelContinuumLayer: "cluster"}, 0},
		"jetson": {"edge-1", "edge-jetson-1", map[string]string{
			mlsysopsv1.LabelArch: "arm64", mlsysopsv1.LabelLayer: "edge", mlsysopsv1.LabelGPUProduct: "NVIDIA-Jetson-AGX-Orin",
		}, 1},
		"raspberry pi": {"edge-1", "far-edge-rpi-1", map[string]string{mlsysopsv1.LabelArch: "arm64", mlsysopsv1.LabelLayer: "far_edge"}, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, tc.cluster))
			n, err := cs.CoreV1().Nodes().Get(ctx, tc.node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.labels {
				if n.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
				}
			}
			got := n.Status.Allocatable[mlsysopsv1.ResourceGPU]
			if got.Value() != tc.gpus {
				t.Errorf("allocatable %s = %s, want %d", mlsysopsv1.ResourceGPU, got.String(), tc.gpus)
			}
			if _, ok := n.Labels[mlsysopsv1.LabelGPUProduct]; ok != (tc.gpus > 0) {
				t.Errorf("GPU product label present = %v, want %v", ok, tc.gpus > 0)
			}
		})
	}
}

func TestServices(t *testing.T) {
	env := testbed.Shared(t)
	c := redis.NewClient(&redis.Options{Addr: env.RedisAddr, Password: env.RedisPassword})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Errorf("redis with the testbed's password: %v", err)
	}
	bad := redis.NewClient(&redis.Options{Addr: env.RedisAddr})
	defer bad.Close()
	if err := bad.Ping(context.Background()).Err(); err == nil {
		t.Error("redis answers without a password")
	}
	if env.XMPPAddr == "" || env.XMPPDomain == "" || env.XMPPCAFile == "" || env.XMPPAdminPassword == "" {
		t.Errorf("incomplete XMPP endpoint in env: %+v", env)
	}
}

// A GPU Deployment propagated by Karmada to cloud-1 lands on the node whose
// GPU product its nodeSelector names, and kube-scheduler accounts the GPUs:
// a second Deployment asking for more than remain stays Pending.
func TestGPUDeploymentPropagatedAndAccounted(t *testing.T) {
	env := testbed.Shared(t)
	ctx := context.Background()
	karmadaCfg := env.RESTConfig(t, testbed.ContextKarmada)
	kcs := kubernetes.NewForConfigOrDie(karmadaCfg)
	kc := karmadaclientset.NewForConfigOrDie(karmadaCfg)
	member := kubernetes.NewForConfigOrDie(env.RESTConfig(t, "cloud-1"))

	ns := "tb-gpu-" + rand.String(5)
	if _, err := kcs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kcs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	const product = "NVIDIA-H100-80GB-HBM3" // 8 GPUs on cloud-gpu-h100-1
	for _, d := range []struct {
		name string
		gpus int64
	}{{"train", 6}, {"train-more", 3}} {
		if _, err := kcs.AppsV1().Deployments(ns).Create(ctx, gpuDeployment(d.name, product, d.gpus), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pp := &policyv1alpha1.PropagationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: ns},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.name}},
				Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"cloud-1"}}},
			},
		}
		if _, err := kc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, pp, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if d.name == "train" {
			pod := waitPod(t, member, ns, d.name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			if pod.Spec.NodeName != "cloud-gpu-h100-1" {
				t.Fatalf("pod %s runs on %q, want cloud-gpu-h100-1", pod.Name, pod.Spec.NodeName)
			}
		}
	}
	pending := waitPod(t, member, ns, "train-more", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	})
	if pending.Status.Phase != corev1.PodPending || pending.Spec.NodeName != "" {
		t.Errorf("over-asking pod: phase %s on %q, want Pending and unscheduled", pending.Status.Phase, pending.Spec.NodeName)
	}
	for _, c := range pending.Status.Conditions {
		if c.Type == corev1.PodScheduled && !strings.Contains(c.Message, "Insufficient nvidia.com/gpu") {
			t.Errorf("unschedulable for another reason: %s", c.Message)
		}
	}
}

func gpuDeployment(name, product string, gpus int64) *appsv1.Deployment {
	one := int32(1)
	labels := map[string]string{"app": name}
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{mlsysopsv1.LabelGPUProduct: product},
					Containers: []corev1.Container{{
						Name: "train", Image: "registry.example/train:1",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{mlsysopsv1.ResourceGPU: q},
							Limits:   corev1.ResourceList{mlsysopsv1.ResourceGPU: q},
						},
					}},
				},
			},
		},
	}
}

// waitPod waits until a pod of the Deployment satisfies ok.
func waitPod(t *testing.T, cs kubernetes.Interface, ns, app string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d pods", len(pods.Items))
		for i := range pods.Items {
			if ok(&pods.Items[i]) {
				found = &pods.Items[i]
				return true, nil
			}
			last = fmt.Sprintf("pod %s phase %s on %q", pods.Items[i].Name, pods.Items[i].Status.Phase, pods.Items[i].Spec.NodeName)
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod of %s/%s: %v (last: %s)", ns, app, err, last)
	}
	return found
}
