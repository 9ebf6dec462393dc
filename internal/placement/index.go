package placement

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// Index is what placement knows of the nodes of one cluster, kept up to
// date change by change rather than converted at every decision: each
// node's readiness, taints, labels (and an index of nodes by label value,
// so that a component asking for a GPU model, an architecture or a layer
// looks only at the nodes that have it), allocatable and requested
// resources as vectors, the CPU frequencies, container runtimes and
// performance of its description, and the pods bound to it by
// application component.
//
// The cluster agent feeds it from its node, pod and MLSysOpsNode
// informers; the continuum agent from each cluster's capacity reports.
// It is safe for concurrent use: decisions read it while updates arrive.
type Index struct {
	mu sync.RWMutex
	// entries by node name: nodes, and names that only pods or a
	// description know so far (present false).
	entries map[string]*entry
	// sorted holds the present entries by name.
	sorted []*entry
	// byLabel indexes the present entries by label key, then value.
	byLabel map[string]map[string]map[*entry]struct{}
	// pods by namespace/name.
	pods map[string]*podEntry
	// comps counts, per application component ("app/component"), what
	// its pods request on each node, for placing a component again
	// without its own pods.
	comps map[string]map[*entry]*compUsage
	asOf  time.Time
	// sum summarises the nodes for cluster placement's bounds; every
	// change drops it (see change).
	sum atomic.Pointer[summary]
}

// change locks the index for a change and drops its summary.
func (x *Index) change() {
	x.mu.Lock()
	x.sum.Store(nil)
}

// entry is one node.
type entry struct {
	name    string
	present bool
	node    *corev1.Node
	labels  map[string]string
	// labelsKey identifies the labels a report gave, to tell whether
	// the next report changes them.
	labelsKey string
	ready     bool
	cordon    bool
	// taints are the NoSchedule and NoExecute taints, as key=value:effect
	// and parsed (hard).
	taints []string
	hard   []corev1.Taint
	alloc  vec
	// base is what is requested on the node beyond its indexed pods (a
	// report's or a caller's total); used is base plus the pods.
	base, used vec
	gpuNode    bool
	fpgaNode   bool
	desc       *mlsysopsv1.MLSysOpsNodeSpec
	maxFreqHz  int64
	hasFreq    bool
	runtimes   []string
	// perf is the score's CPU performance term; hasPerf says there is one.
	perf    float64
	hasPerf bool
	pods    map[string]*podEntry
}

type podEntry struct {
	key         string
	node        *entry
	comp        string // app/component, "" for pods of no application
	req         vec
	terminating bool
}

type compUsage struct {
	req vec
	// live counts the pods that are not terminating.
	live int32
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{
		entries: map[string]*entry{}, byLabel: map[string]map[string]map[*entry]struct{}{},
		pods: map[string]*podEntry{}, comps: map[string]map[*entry]*compUsage{},
	}
}

// NewIndexOf indexes a list of nodes: each with its Requested, its
// Description and, for placing a component again without its own pods,
// its Pods (already counted in Requested).
func NewIndexOf(nodes []Node) *Index {
	x := NewIndex()
	x.change()
	defer x.mu.Unlock()
	for i := range nodes {
		n := &nodes[i]
		e := x.upsertNodeLocked(n.Node)
		x.setDescLocked(e, n.Description)
		for _, p := range n.Pods {
			x.upsertPodLocked(p)
		}
		// Requested already holds the pods: base is what they do not
		// explain.
		total := vecOf(n.Requested)
		e.base, e.used = total.plus(e.used, -1), total
	}
	return x
}

// compKey names an application component in Index.comps.
func compKey(app, comp string) string { return app + "/" + comp }

func (x *Index) entryLocked(name string) *entry {
	e := x.entries[name]
	if e == nil {
		e = &entry{name: name}
		x.entries[name] = e
	}
	return e
}

// UpsertNode adds or updates a node. The node is kept, not copied: it
// must not be modified afterwards (informer caches hand out objects that
// are replaced, never changed).
func (x *Index) UpsertNode(n *corev1.Node) {
	x.change()
	defer x.mu.Unlock()
	x.upsertNodeLocked(n)
}

func (x *Index) upsertNodeLocked(n *corev1.Node) *entry {
	e := x.entryLocked(n.Name)
	var taints []string
	var hard []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			taints = append(taints, t.ToString())
			hard = append(hard, t)
		}
	}
	x.setLocked(e, nodeReady(n), n.Spec.Unschedulable, taints, hard, n.Labels, vecOf(n.Status.Allocatable))
	e.node, e.labelsKey = n, ""
	return e
}

// setLocked sets what a node is, reindexing its labels when they changed.
func (x *Index) setLocked(e *entry, ready, cordon bool, taints []string, hard []corev1.Taint, labels map[string]string, alloc vec) {
	if !e.present {
		e.present = true
		i, _ := slices.BinarySearchFunc(x.sorted, e.name, func(a *entry, name string) int { return strings.Compare(a.name, name) })
		x.sorted = slices.Insert(x.sorted, i, e)
		x.indexLabelsLocked(e, labels)
	} else if !maps.Equal(e.labels, labels) {
		x.unindexLabelsLocked(e)
		x.indexLabelsLocked(e, labels)
	}
	e.ready, e.cordon, e.taints, e.hard, e.alloc = ready, cordon, taints, hard, alloc
	e.gpuNode = labels[mlsysopsv1.LabelGPUPresent] == "true"
	e.fpgaNode = labels[mlsysopsv1.LabelFPGAPresent] == "true"
}

func (x *Index) indexLabelsLocked(e *entry, labels map[string]string) {
	e.labels = labels
	for k, v := range labels {
		byValue := x.byLabel[k]
		if byValue == nil {
			byValue = map[string]map[*entry]struct{}{}
			x.byLabel[k] = byValue
		}
		set := byValue[v]
		if set == nil {
			set = map[*entry]struct{}{}
			byValue[v] = set
		}
		set[e] = struct{}{}
	}
}

func (x *Index) unindexLabelsLocked(e *entry) {
	for k, v := range e.labels {
		set := x.byLabel[k][v]
		delete(set, e)
		if len(set) == 0 {
			delete(x.byLabel[k], v)
			if len(x.byLabel[k]) == 0 {
				delete(x.byLabel, k)
			}
		}
	}
	e.labels = nil
}

// DeleteNode removes a node; its pods stay counted should it come back.
func (x *Index) DeleteNode(name string) {
	x.change()
	defer x.mu.Unlock()
	x.deleteNodeLocked(name)
}

func (x *Index) deleteNodeLocked(name string) {
	e := x.entries[name]
	if e == nil || !e.present {
		return
	}
	x.unindexLabelsLocked(e)
	if i, ok := slices.BinarySearchFunc(x.sorted, name, func(a *entry, name string) int { return strings.Compare(a.name, name) }); ok {
		x.sorted = slices.Delete(x.sorted, i, i+1)
	}
	e.present, e.node, e.alloc, e.base, e.taints, e.hard = false, nil, nil, nil, nil, nil
	e.used = nil
	for _, p := range e.pods {
		e.used = e.used.addTo(p.req, 1)
	}
	x.dropIfEmptyLocked(e)
}

func (x *Index) dropIfEmptyLocked(e *entry) {
	if !e.present && len(e.pods) == 0 && e.desc == nil {
		delete(x.entries, e.name)
	}
}

// SetDescription sets the MLSysOpsNode description of a node (nil
// removes it): CPU frequencies, container runtimes and performance.
func (x *Index) SetDescription(name string, d *mlsysopsv1.MLSysOpsNodeSpec) {
	x.change()
	defer x.mu.Unlock()
	e := x.entryLocked(name)
	x.setDescLocked(e, d)
	x.dropIfEmptyLocked(e)
}

func (x *Index) setDescLocked(e *entry, d *mlsysopsv1.MLSysOpsNodeSpec) {
	e.desc, e.maxFreqHz, e.hasFreq, e.runtimes, e.perf, e.hasPerf = d, 0, false, nil, 0, false
	if d == nil {
		return
	}
	if d.Hardware != nil && d.Hardware.CPU != nil {
		if len(d.Hardware.CPU.Frequency) > 0 {
			e.maxFreqHz, e.hasFreq = maxOf(d.Hardware.CPU.Frequency), true
		}
		if p := d.Hardware.CPU.PerformanceIndicator; p != nil {
			e.perf, e.hasPerf = scorePerf(*p), true
		}
	}
	e.runtimes = d.Environment.ContainerRuntime
}

// UpsertPod adds or updates a pod. Pods not bound to a node, and pods
// that are done (Succeeded or Failed), hold nothing and are removed.
func (x *Index) UpsertPod(p *corev1.Pod) {
	x.change()
	defer x.mu.Unlock()
	x.upsertPodLocked(p)
}

func (x *Index) upsertPodLocked(p *corev1.Pod) {
	key := p.Namespace + "/" + p.Name
	if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		x.deletePodLocked(key)
		return
	}
	comp := ""
	if app := p.Labels[mlsysopsv1.LabelApp]; app != "" {
		comp = compKey(app, p.Labels[mlsysopsv1.LabelComponent])
	}
	req := podVec(p)
	terminating := !p.DeletionTimestamp.IsZero()
	if old := x.pods[key]; old != nil {
		if old.node.name == p.Spec.NodeName && old.comp == comp && old.terminating == terminating && slices.Equal(old.req, req) {
			return // a status change: nothing placement counts
		}
		x.deletePodLocked(key)
	}
	e := x.entryLocked(p.Spec.NodeName)
	pe := &podEntry{key: key, node: e, comp: comp, req: req, terminating: terminating}
	x.pods[key] = pe
	if e.pods == nil {
		e.pods = map[string]*podEntry{}
	}
	e.pods[key] = pe
	e.used = e.used.plus(req, 1)
	if comp != "" {
		byNode := x.comps[comp]
		if byNode == nil {
			byNode = map[*entry]*compUsage{}
			x.comps[comp] = byNode
		}
		cu := byNode[e]
		if cu == nil {
			cu = &compUsage{}
			byNode[e] = cu
		}
		cu.req = cu.req.plus(req, 1)
		if !terminating {
			cu.live++
		}
	}
}

// DeletePod removes a pod.
func (x *Index) DeletePod(namespace, name string) {
	x.change()
	defer x.mu.Unlock()
	x.deletePodLocked(namespace + "/" + name)
}

func (x *Index) deletePodLocked(key string) {
	pe := x.pods[key]
	if pe == nil {
		return
	}
	delete(x.pods, key)
	e := pe.node
	delete(e.pods, key)
	e.used = e.used.plus(pe.req, -1)
	if pe.comp != "" {
		byNode := x.comps[pe.comp]
		if cu := byNode[e]; cu != nil {
			cu.req = cu.req.plus(pe.req, -1)
			if !pe.terminating {
				cu.live--
			}
			if len(byNode) > 0 && cu.req.zero() && cu.live == 0 {
				delete(byNode, e)
			}
		}
		if len(byNode) == 0 {
			delete(x.comps, pe.comp)
		}
	}
	x.dropIfEmptyLocked(e)
}

// podVec is what a pod requests, counted as the scheduler does (see
// AddPodRequests).
func podVec(p *corev1.Pod) vec {
	var v vec
	for _, c := range p.Spec.Containers {
		for name, q := range c.Resources.Requests {
			i := column(name)
			v = v.grow(i + 1)
			v[i] += q.MilliValue()
		}
	}
	for _, c := range p.Spec.InitContainers {
		for name, q := range c.Resources.Requests {
			i := column(name)
			v = v.grow(i + 1)
			v[i] = max(v[i], q.MilliValue())
		}
	}
	for name, q := range p.Spec.Overhead {
		i := column(name)
		v = v.grow(i + 1)
		v[i] += q.MilliValue()
	}
	v = v.grow(colPods + 1)
	v[colPods] += 1000
	return v
}

// SetAsOf records when what the index holds was read (a report's
// arrival); the continuum's assumed ledger compares it with when an
// application was seen running.
func (x *Index) SetAsOf(t time.Time) {
	x.change()
	defer x.mu.Unlock()
	x.asOf = t
}

// AsOf is when what the index holds was read; zero when unknown.
func (x *Index) AsOf() time.Time {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.asOf
}

// Len counts the nodes.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.sorted)
}

// Ready reports whether the node exists and is Ready.
func (x *Index) Ready(name string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.entries[name]
	return e != nil && e.present && e.ready
}

// Has reports whether the node exists.
func (x *Index) Has(name string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.entries[name]
	return e != nil && e.present
}

// Node returns the node as last upserted (nil when absent). It must not
// be modified.
func (x *Index) Node(name string) *corev1.Node {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if e := x.entries[name]; e != nil && e.present {
		return e.node
	}
	return nil
}

// HasLabel reports whether some node has the label key=value.
func (x *Index) HasLabel(key, value string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byLabel[key][value]) > 0
}

// LivePods counts the pods of an application component on a node that
// are not terminating.
func (x *Index) LivePods(node, app, comp string) int32 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.entries[node]
	if e == nil {
		return 0
	}
	if cu := x.comps[compKey(app, comp)][e]; cu != nil {
		return cu.live
	}
	return 0
}

// NodeState is a node of the index as Nodes returns it.
type NodeState struct {
	Name          string
	Ready         bool
	Unschedulable bool
	// Taints are the NoSchedule and NoExecute taints as key=value:effect.
	Taints      []string
	Labels      map[string]string
	Allocatable corev1.ResourceList
	Requested   corev1.ResourceList
}

// NodeNames returns the names of every node, sorted.
func (x *Index) NodeNames() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, len(x.sorted))
	for i, e := range x.sorted {
		out[i] = e.name
	}
	return out
}

// Nodes returns every node, sorted by name, with what is requested on it.
// Labels are shared with the index: do not modify them.
func (x *Index) Nodes() []NodeState {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]NodeState, len(x.sorted))
	for i, e := range x.sorted {
		alloc := listOf(e.alloc)
		if e.node != nil {
			alloc = e.node.Status.Allocatable
		}
		out[i] = NodeState{Name: e.name, Ready: e.ready, Unschedulable: e.cordon, Taints: e.taints, Labels: e.labels,
			Allocatable: alloc, Requested: listOf(e.used)}
	}
	return out
}
