package placement

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

// MaxReportNodesBytes bounds the node list of a capacity report: above it
// the report carries only the cluster's totals (XMPP stanzas are limited,
// and the continuum can read the nodes through Karmada instead).
const MaxReportNodesBytes = 512 << 10

// Report summarises a cluster for its capacity report: totals of ready,
// schedulable nodes, GPUs by model, and every node with its labels,
// allocatable and requested resources. pods are the cluster's pods that
// are neither Succeeded nor Failed.
func Report(cluster string, nodes []corev1.Node, pods []corev1.Pod, now time.Time) *messaging.CapacityReport {
	rep := &messaging.CapacityReport{Cluster: cluster, Time: now.UTC(), GPUs: map[string]messaging.GPUCapacity{}}
	for _, pn := range NodesWithPods(nodes, pods) {
		n, req := pn.Node, pn.Requested
		nc := messaging.NodeCapacity{
			Name: n.Name, Ready: nodeReady(n), Unschedulable: n.Spec.Unschedulable,
			Labels: n.Labels, Allocatable: quantities(n.Status.Allocatable), Requested: quantities(req),
		}
		for _, t := range n.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
				nc.Taints = append(nc.Taints, t.ToString())
			}
		}
		rep.Nodes = append(rep.Nodes, nc)
		if !nc.Ready || nc.Unschedulable {
			continue
		}
		rep.ReadyNodes++
		add := func(q *messaging.Quantity, alloc, used resource.Quantity, milli bool) {
			a, u := alloc.Value(), used.Value()
			if milli {
				a, u = alloc.MilliValue(), used.MilliValue()
			}
			q.Allocatable += a
			q.Free += max(0, a-u)
		}
		add(&rep.CPUMillis, n.Status.Allocatable[corev1.ResourceCPU], req[corev1.ResourceCPU], true)
		add(&rep.MemoryBytes, n.Status.Allocatable[corev1.ResourceMemory], req[corev1.ResourceMemory], false)
		gpus, ok := n.Status.Allocatable[mlsysopsv1.ResourceGPU]
		if !ok || gpus.Value() == 0 {
			continue
		}
		model := n.Labels[mlsysopsv1.LabelGPUProduct]
		if model == "" {
			model = "unknown"
		}
		used := req[mlsysopsv1.ResourceGPU]
		g := rep.GPUs[model]
		g.Total += int(gpus.Value())
		g.Free += int(max(0, gpus.Value()-used.Value()))
		if mib, err := strconv.ParseInt(n.Labels[mlsysopsv1.LabelGPUMemory], 10, 64); err == nil {
			g.MemoryMiB = mib
		}
		rep.GPUs[model] = g
	}
	if len(rep.GPUs) == 0 {
		rep.GPUs = nil
	}
	if b, err := json.Marshal(rep.Nodes); err != nil || len(b) > MaxReportNodesBytes {
		rep.Nodes = nil
	}
	return rep
}

func quantities(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}

// NodesFromReport turns a capacity report's node list back into the nodes
// cluster placement filters. It fails on a malformed quantity or taint,
// naming it.
func NodesFromReport(rep *messaging.CapacityReport) ([]Node, error) {
	out := make([]Node, 0, len(rep.Nodes))
	for i, nc := range rep.Nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: nc.Labels}}
		n.Spec.Unschedulable = nc.Unschedulable
		status := corev1.ConditionFalse
		if nc.Ready {
			status = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
		var err error
		if n.Status.Allocatable, err = resourceList(nc.Allocatable); err != nil {
			return nil, fmt.Errorf("nodes[%d] (%s).allocatable: %w", i, nc.Name, err)
		}
		requested, err := resourceList(nc.Requested)
		if err != nil {
			return nil, fmt.Errorf("nodes[%d] (%s).requested: %w", i, nc.Name, err)
		}
		for j, t := range nc.Taints {
			taint, err := parseTaint(t)
			if err != nil {
				return nil, fmt.Errorf("nodes[%d] (%s).taints[%d]: %w", i, nc.Name, j, err)
			}
			n.Spec.Taints = append(n.Spec.Taints, taint)
		}
		out = append(out, Node{Node: n, Requested: requested})
	}
	return out, nil
}

func resourceList(m map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for name, v := range m {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a quantity", name, v)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// parseTaint reads key[=value]:effect, as corev1.Taint.ToString writes it.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || kv == "" {
		return corev1.Taint{}, fmt.Errorf("%q: want key[=value]:effect", s)
	}
	key, value, _ := strings.Cut(kv, "=")
	switch e := corev1.TaintEffect(effect); e {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule:
		return corev1.Taint{Key: key, Value: value, Effect: e}, nil
	}
	return corev1.Taint{}, fmt.Errorf("%q: unknown effect %q", s, effect)
}
