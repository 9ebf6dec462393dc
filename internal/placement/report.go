package placement

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

// MaxReportNodesBytes bounds the node list (with its shapes) of a
// capacity report: above it the report carries only the cluster's totals,
// and the continuum reads the nodes through Karmada instead. It leaves
// the totals room under the messaging payload limit.
const MaxReportNodesBytes = messaging.MaxPayloadSize - 24<<10

// Report summarises a cluster for its capacity report (see Index.Report);
// pods are the cluster's pods.
func Report(cluster string, nodes []corev1.Node, pods []corev1.Pod, now time.Time) *messaging.CapacityReport {
	x := NewIndex()
	for i := range nodes {
		x.UpsertNode(&nodes[i])
	}
	for i := range pods {
		x.UpsertPod(&pods[i])
	}
	return x.Report(cluster, now)
}

// Report summarises the cluster for its capacity report: totals of
// ready, schedulable nodes, GPUs by model, and every node with its
// labels, allocatable and requested resources, nodes of a kind sharing
// one shape.
func (x *Index) Report(cluster string, now time.Time) *messaging.CapacityReport {
	rep := &messaging.CapacityReport{Cluster: cluster, Time: now.UTC(), GPUs: map[string]messaging.GPUCapacity{}}
	shapes := map[string]int{}
	for _, n := range x.Nodes() {
		nc := messaging.NodeCapacity{Name: n.Name, Ready: n.Ready, Unschedulable: n.Unschedulable, Requested: quantities(n.Requested)}
		if n.Labels[mlsysopsv1.LabelHostname] == n.Name {
			labels := maps.Clone(n.Labels)
			delete(labels, mlsysopsv1.LabelHostname)
			shape := messaging.NodeShape{Labels: labels, Allocatable: quantities(n.Allocatable), Taints: n.Taints}
			key := shapeKey(shape.Labels, shape.Allocatable, shape.Taints)
			i, ok := shapes[key]
			if !ok {
				rep.Shapes = append(rep.Shapes, shape)
				i = len(rep.Shapes)
				shapes[key] = i
			}
			nc.Shape = i
		} else {
			nc.Labels, nc.Allocatable, nc.Taints = n.Labels, quantities(n.Allocatable), n.Taints
		}
		rep.Nodes = append(rep.Nodes, nc)
		if !n.Ready || n.Unschedulable {
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
		add(&rep.CPUMillis, n.Allocatable[corev1.ResourceCPU], n.Requested[corev1.ResourceCPU], true)
		add(&rep.MemoryBytes, n.Allocatable[corev1.ResourceMemory], n.Requested[corev1.ResourceMemory], false)
		gpus, ok := n.Allocatable[mlsysopsv1.ResourceGPU]
		if !ok || gpus.Value() == 0 {
			continue
		}
		model := n.Labels[mlsysopsv1.LabelGPUProduct]
		if model == "" {
			model = "unknown"
		}
		used := n.Requested[mlsysopsv1.ResourceGPU]
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
	if size := reportNodesSize(rep); size < 0 || size > MaxReportNodesBytes {
		rep.Nodes, rep.Shapes = nil, nil
	}
	return rep
}

func reportNodesSize(rep *messaging.CapacityReport) int {
	a, err1 := json.Marshal(rep.Nodes)
	b, err2 := json.Marshal(rep.Shapes)
	if err1 != nil || err2 != nil {
		return -1
	}
	return len(a) + len(b)
}

// shapeKey is a canonical text of a shape, for grouping and comparing.
func shapeKey(labels, alloc map[string]string, taints []string) string {
	var b strings.Builder
	for _, m := range []map[string]string{labels, alloc} {
		keys := slices.Sorted(maps.Keys(m))
		for _, k := range keys {
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(m[k])
			b.WriteByte(0)
		}
		b.WriteByte(1)
	}
	for _, t := range taints {
		b.WriteString(t)
		b.WriteByte(0)
	}
	return b.String()
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

// reportedNode is a node of a report, read and checked.
type reportedNode struct {
	name          string
	ready, cordon bool
	taints        []string
	hard          []corev1.Taint
	alloc, used   vec
	// labels of their own, or the shape's plus the host name (built only
	// when they changed, which labelsKey tells).
	labels    map[string]string
	shape     *reportedShape
	labelsKey string
}

type reportedShape struct {
	labels map[string]string
	alloc  vec
	taints []string
	hard   []corev1.Taint
	key    string
}

// ApplyReport makes the index hold the nodes of a capacity report that
// arrived at: nodes are added, updated and removed to match it, and only
// what changed is reindexed. On a malformed quantity, taint or shape it
// fails, naming it, and changes nothing. A report without a node list
// changes nothing either.
func (x *Index) ApplyReport(rep *messaging.CapacityReport, at time.Time) error {
	shapes := make([]*reportedShape, len(rep.Shapes))
	for i, s := range rep.Shapes {
		alloc, err := vecOfStrings(s.Allocatable)
		if err != nil {
			return fmt.Errorf("shapes[%d].allocatable: %w", i, err)
		}
		taints, hard, err := normalTaints(s.Taints)
		if err != nil {
			return fmt.Errorf("shapes[%d].taints%w", i, err)
		}
		shapes[i] = &reportedShape{labels: s.Labels, alloc: alloc, taints: taints, hard: hard, key: shapeKey(s.Labels, nil, nil)}
	}
	nodes := make([]reportedNode, len(rep.Nodes))
	for i, nc := range rep.Nodes {
		n := reportedNode{name: nc.Name, ready: nc.Ready, cordon: nc.Unschedulable}
		var err error
		if n.used, err = vecOfStrings(nc.Requested); err != nil {
			return fmt.Errorf("nodes[%d] (%s).requested: %w", i, nc.Name, err)
		}
		switch {
		case nc.Shape < 0 || nc.Shape > len(shapes):
			return fmt.Errorf("nodes[%d] (%s).shape: %d is not one of the %d shapes", i, nc.Name, nc.Shape, len(shapes))
		case nc.Shape > 0:
			n.shape = shapes[nc.Shape-1]
			n.alloc, n.taints, n.hard = n.shape.alloc, n.shape.taints, n.shape.hard
			n.labelsKey = n.shape.key + "\x02" + nc.Name
		default:
			if n.alloc, err = vecOfStrings(nc.Allocatable); err != nil {
				return fmt.Errorf("nodes[%d] (%s).allocatable: %w", i, nc.Name, err)
			}
			if n.taints, n.hard, err = normalTaints(nc.Taints); err != nil {
				return fmt.Errorf("nodes[%d] (%s).taints%w", i, nc.Name, err)
			}
			n.labels = nc.Labels
			n.labelsKey = shapeKey(nc.Labels, nil, nil)
		}
		nodes[i] = n
	}
	if rep.Nodes == nil {
		return nil
	}

	x.change()
	defer x.mu.Unlock()
	keep := make(map[string]bool, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		keep[n.name] = true
		e := x.entryLocked(n.name)
		labels := e.labels
		if !e.present || e.labelsKey != n.labelsKey {
			labels = n.labels
			if n.shape != nil {
				labels = make(map[string]string, len(n.shape.labels)+1)
				maps.Copy(labels, n.shape.labels)
				labels[mlsysopsv1.LabelHostname] = n.name
			}
		}
		x.setLocked(e, n.ready, n.cordon, n.taints, n.hard, labels, n.alloc)
		e.labelsKey, e.node = n.labelsKey, nil
		e.base = n.used
		e.used = n.used
		for _, p := range e.pods {
			e.used = e.used.plus(p.req, 1)
		}
	}
	for _, e := range slices.Clone(x.sorted) {
		if !keep[e.name] {
			x.deleteNodeLocked(e.name)
		}
	}
	x.asOf = at
	return nil
}

// vecOfStrings reads a map of resource names to quantities.
func vecOfStrings(m map[string]string) (vec, error) {
	var v vec
	names := slices.Sorted(maps.Keys(m))
	for _, name := range names {
		q, err := resource.ParseQuantity(m[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a quantity", name, m[name])
		}
		i := column(corev1.ResourceName(name))
		v = v.grow(i + 1)
		v[i] = q.MilliValue()
	}
	return v, nil
}

// normalTaints reads the hard (NoSchedule, NoExecute) taints written as
// key[=value]:effect, and writes them back as corev1.Taint.ToString does;
// the error starts with the position ("[2]: ...").
func normalTaints(in []string) ([]string, []corev1.Taint, error) {
	var out []string
	var hard []corev1.Taint
	for j, t := range in {
		taint, err := parseTaint(t)
		if err != nil {
			return nil, nil, fmt.Errorf("[%d]: %w", j, err)
		}
		if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
			out = append(out, taint.ToString())
			hard = append(hard, taint)
		}
	}
	return out, hard, nil
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
