package sidebyside_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/cluster"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// BenchmarkMemberWrites measures what each step of an application's life
// in a member cluster costs that cluster's control plane and Karmada's
// controllers that follow it: the CPU of the testbed's processes per
// object, beyond their idle use, for N objects (MLSYSOPS_MEMBER_WRITES_N,
// default 200) written one after the other, then left to settle. The
// steps MLSysOps adds to raw Karmada's (the namespace, with the service
// account and CA ConfigMap the controller manager puts in it; the copy's
// finalizer, its status, a live read) beside those both make (the
// copy's creation, a Deployment with its ReplicaSet and pod), and the
// removals. The objects live in namespaces of their own, without the
// labels of MLSysOps's objects: no agent acts on them.
func BenchmarkMemberWrites(b *testing.B) {
	if b.N > 1 {
		b.Skip("one pass (-benchtime 1x)")
	}
	env := testbed.ScaleTestbed(b, testbed.ScaleSize{Clusters: 2, Nodes: 60})
	member := env.Clusters[0]
	scheme, err := cluster.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	cfg := env.RESTConfig(b, member)
	cfg.QPS, cfg.Burst = 1000, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	n := 200
	if v, err := strconv.Atoi(os.Getenv("MLSYSOPS_MEMBER_WRITES_N")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	prefix := fmt.Sprintf("bench-mw-%d", time.Now().Unix()%100000)
	nsName := func(i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

	// Idle use first, per second, to take out of each step.
	i0, t0 := cpuTimes(env.StateDir), time.Now()
	time.Sleep(10 * time.Second)
	idle := perSecond(cpuTimes(env.StateDir), i0, time.Since(t0))

	step := func(name string, settle time.Duration, f func(i int) error) {
		s0, t0 := cpuTimes(env.StateDir), time.Now()
		for i := range n {
			if err := f(i); err != nil {
				b.Fatalf("%s, object %d: %v", name, i, err)
			}
		}
		time.Sleep(settle)
		el := time.Since(t0)
		total, top := beyondIdle(cpuTimes(env.StateDir), s0, idle, el, n)
		b.ReportMetric(total, strings.ReplaceAll(name, " ", "-")+"-ms/object")
		fmt.Printf("member writes %s: %.2f ms CPU per object beyond idle (%d objects in %.1f s with %s to settle): %s\n",
			name, total, n, el.Seconds(), settle, top)
	}
	cpuQ, memQ := resource.MustParse("10m"), resource.MustParse("16Mi")
	apps := make([]*mlsysopsv1.MLSysOpsApp, n)
	step("namespace", 5*time.Second, func(i int) error {
		return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(i), Labels: map[string]string{benchLabel: "true"}}})
	})
	step("copy create", 5*time.Second, func(i int) error {
		apps[i] = &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: nsName(i)},
			Spec: *appSpec(nsName(i), Shape{Components: 1, Clusters: []string{member}})}
		return c.Create(ctx, apps[i])
	})
	step("copy finalizer", 5*time.Second, func(i int) error {
		apps[i].Finalizers = []string{mlsysopsv1.Finalizer}
		return c.Update(ctx, apps[i])
	})
	step("copy status", 5*time.Second, func(i int) error {
		before := apps[i].DeepCopy()
		apps[i].Status.Phase, apps[i].Status.Message = mlsysopsv1.AppRunning, "all components ready"
		apps[i].Status.Components = []mlsysopsv1.ComponentStatus{{Name: "c0", Cluster: member, Replicas: 1, ReadyReplicas: 1, Nodes: []string{"node"}}}
		return c.Status().Patch(ctx, apps[i], client.MergeFrom(before))
	})
	step("copy live read", 2*time.Second, func(i int) error {
		return c.Get(ctx, client.ObjectKeyFromObject(apps[i]), &mlsysopsv1.MLSysOpsApp{})
	})
	one := int32(1)
	step("deployment to running pod", 15*time.Second, func(i int) error {
		l := map[string]string{benchLabel: "true", "app": nsName(i)}
		return c.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "c0", Namespace: nsName(i)}, Spec: appsv1.DeploymentSpec{
			Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c0", Image: "registry.example/svc-0:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpuQ, corev1.ResourceMemory: memQ}}}},
				// Any node of the member may take it.
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			}},
		}})
	})
	step("copy removal", 5*time.Second, func(i int) error {
		apps[i].Finalizers = nil
		if err := c.Update(ctx, apps[i]); err != nil {
			return err
		}
		return c.Delete(ctx, apps[i])
	})
	step("namespace removal", 20*time.Second, func(i int) error {
		return c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(i)}})
	})
}

// perSecond is each process's CPU per second between two readings.
func perSecond(now, before map[string]float64, d time.Duration) map[string]float64 {
	out := map[string]float64{}
	for k, v := range now {
		out[k] = (v - before[k]) / d.Seconds()
	}
	return out
}

// beyondIdle is the CPU the processes used between two readings d apart
// beyond their idle use, in ms per object, with the largest named.
func beyondIdle(now, before, idle map[string]float64, d time.Duration, n int) (total float64, top string) {
	busy := map[string]float64{}
	for k, v := range now {
		busy[k] = v - idle[k]*d.Seconds()
	}
	total, top = cpuSince(busy, before, float64(n)/1000)
	return total * 1000 / float64(n), top
}
