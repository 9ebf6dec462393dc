package placement

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/resources"
)

// Node is what node placement knows of one node.
type Node struct {
	// Node is the Kubernetes node: labels, allocatable, taints, conditions.
	Node *corev1.Node
	// Requested sums the requests of the pods already on the node.
	Requested corev1.ResourceList
	// Description is the node's MLSysOpsNode spec, when known: CPU
	// frequencies, container runtimes and performance indicators come
	// from it.
	Description *mlsysopsv1.MLSysOpsNodeSpec
	// Pods on the node, when the caller has them (the cluster agent uses
	// them to discount a component's own pods when it re-places it).
	Pods []*corev1.Pod
}

// Name is the node's name.
func (n *Node) Name() string { return n.Node.Name }

// Request is one component to place.
type Request struct {
	App       *mlsysopsv1.MLSysOpsAppSpec
	Component *mlsysopsv1.Component
	// Replicas to place; zero means Replicas(Component).
	Replicas int32
	// Exclude names nodes not to use, with the reason (a failed node, a
	// node whose agent is gone).
	Exclude map[string]string
}

// Decision is the outcome of placing one component.
type Decision struct {
	// Nodes are the nodes chosen, best first; the component's pods get a
	// required node affinity to exactly these.
	Nodes []string
	// Assignment is how many replicas each chosen node takes in the
	// simulated assignment.
	Assignment map[string]int32
	// Unplaced counts replicas no node could take.
	Unplaced int32
	// Rejected gives, for every node that cannot take even one replica,
	// the first reason.
	Rejected map[string]string
	// Scores of the feasible nodes for the first replica (0-100).
	Scores map[string]int64
}

// Feasible reports whether every replica found a node.
func (d *Decision) Feasible() bool { return d.Unplaced == 0 && len(d.Nodes) > 0 }

// Reason summarises why the component could not be fully placed.
func (d *Decision) Reason() string {
	if d.Feasible() {
		return ""
	}
	counts := map[string]int{}
	for _, r := range d.Rejected {
		counts[r]++
	}
	reasons := make([]string, 0, len(counts))
	for r := range counts {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if counts[reasons[i]] != counts[reasons[j]] {
			return counts[reasons[i]] > counts[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, 0, len(reasons))
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%d node(s) %s", counts[r], r))
	}
	prefix := "no node fits"
	if len(d.Nodes) > 0 {
		prefix = fmt.Sprintf("%d replica(s) do not fit", d.Unplaced)
	}
	if len(parts) == 0 {
		return prefix + ": no nodes"
	}
	return prefix + ": " + strings.Join(parts, "; ")
}

// Replicas is the number of replicas a component asks for: its node
// placement's scaling instances, else one.
func Replicas(app *mlsysopsv1.MLSysOpsAppSpec, comp *mlsysopsv1.Component) int32 {
	if np := resources.EffectivePlacement(app, comp); np != nil && np.Scaling != nil && np.Scaling.Instances > 0 {
		return np.Scaling.Instances
	}
	return 1
}

// PodRequests sums the resource requests of a component's containers
// (limits stand in for missing requests, as Kubernetes defaults them), plus
// one pod. Init containers run one at a time before them, so, as for
// Kubernetes, a resource counts as the larger of the containers' sum and
// the largest init container's request.
func PodRequests(comp *mlsysopsv1.Component) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, c := range comp.Containers {
		for name, q := range containerRequests(c) {
			add(total, name, q)
		}
	}
	for _, c := range comp.InitContainers {
		for name, q := range containerRequests(c) {
			if cur, ok := total[name]; !ok || q.Cmp(cur) > 0 {
				total[name] = q
			}
		}
	}
	total[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return total
}

// containerRequests is what one container requests (limits stand in for
// missing requests).
func containerRequests(c mlsysopsv1.Container) corev1.ResourceList {
	out := corev1.ResourceList{}
	rr := resources.ContainerResources(c.PlatformRequirements)
	for name, q := range rr.Limits {
		out[name] = q
	}
	for name, q := range rr.Requests {
		out[name] = q
	}
	return out
}

func add(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	cur := list[name]
	cur.Add(q)
	list[name] = cur
}

// Resource indexes of compiled.res; every request tracks at least these.
const (
	resCPU = iota
	resMemory
	resGPU
	resPods
)

// compiled is a request prepared once for many nodes. Quantities are kept
// as int64 milli-units, indexed like res, so the hot loop over thousands
// of nodes does no map or Quantity work.
type compiled struct {
	reqs      []corev1.NodeSelectorRequirement
	perPod    corev1.ResourceList
	res       []corev1.ResourceName
	want      []int64
	gpus      int64
	fpga      bool
	minFreqHz int64
	runtime   string
	nvidiaRC  bool
	// tolerations the component's pods carry (resources.Tolerations).
	tolerations []corev1.Toleration
}

func compile(req Request) (*compiled, error) {
	c := &compiled{reqs: resources.NodeSelectorRequirements(req.App, req.Component), perPod: PodRequests(req.Component),
		tolerations: resources.Tolerations(req.Component)}
	// The GPU's memory is judged last, so that a node without a GPU says
	// that rather than that it has no GPU memory.
	if i := slices.IndexFunc(c.reqs, func(r corev1.NodeSelectorRequirement) bool { return r.Key == mlsysopsv1.LabelGPUMemory }); i >= 0 {
		c.reqs = append(append(slices.Clone(c.reqs[:i]), c.reqs[i+1:]...), c.reqs[i])
	}
	for _, r := range c.reqs {
		if err := checkRequirement(r); err != nil {
			return nil, fmt.Errorf("component %s: node requirement %s: %w", req.Component.Metadata.Name, r.Key, err)
		}
	}
	c.res = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, mlsysopsv1.ResourceGPU, corev1.ResourcePods}
	var extra []corev1.ResourceName
	for name := range c.perPod {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != mlsysopsv1.ResourceGPU && name != corev1.ResourcePods {
			extra = append(extra, name)
		}
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
	c.res = append(c.res, extra...)
	c.want = make([]int64, len(c.res))
	for i, name := range c.res {
		q := c.perPod[name]
		c.want[i] = q.MilliValue()
	}
	g := c.perPod[mlsysopsv1.ResourceGPU]
	c.gpus = g.Value()
	for _, ct := range req.Component.Containers {
		if pr := ct.PlatformRequirements; pr != nil {
			c.fpga = c.fpga || pr.FPGA != nil
			if pr.CPU != nil && pr.CPU.Frequency > c.minFreqHz {
				c.minFreqHz = pr.CPU.Frequency
			}
		}
	}
	c.runtime = req.Component.ContainerRuntime
	c.nvidiaRC = req.Component.RuntimeClassName == "nvidia" || req.Component.RuntimeClassName == "nvidia-experimental"
	return c, nil
}

// nodeState is a node's allocatable and used resources, indexed like
// compiled.res, in milli-units.
type nodeState struct {
	alloc, used []int64
}

func (c *compiled) state(n *Node) nodeState {
	st := nodeState{alloc: make([]int64, len(c.res)), used: make([]int64, len(c.res))}
	for i, name := range c.res {
		if q, ok := n.Node.Status.Allocatable[name]; ok {
			st.alloc[i] = q.MilliValue()
		}
		if q, ok := n.Requested[name]; ok {
			st.used[i] = q.MilliValue()
		}
	}
	return st
}

// fits returns "" when the node can take one more replica, else why not.
func (c *compiled) fits(n *Node, st nodeState) string {
	node := n.Node
	if !nodeReady(node) {
		return "are not Ready"
	}
	if node.Spec.Unschedulable {
		return "are cordoned"
	}
	for _, t := range node.Spec.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !tolerates(c.tolerations, &t) {
			return fmt.Sprintf("have the untolerated taint %s", t.ToString())
		}
	}
	for _, r := range c.reqs {
		if !matches(r, node.Labels) {
			have, ok := node.Labels[r.Key]
			if r.Key == mlsysopsv1.LabelGPUMemory && r.Operator == corev1.NodeSelectorOpGt && len(r.Values) == 1 {
				// Say it in the words of a model that does not fit.
				need, _ := strconv.ParseInt(r.Values[0], 10, 64)
				if !ok {
					return fmt.Sprintf("do not say their GPU memory (label %s); the component needs GPUs of at least %d MiB", r.Key, need+1)
				}
				return fmt.Sprintf("have GPUs of %s MiB, too small: the component needs GPUs of at least %d MiB", have, need+1)
			}
			if !ok {
				return fmt.Sprintf("lack label %s (want %s %s)", r.Key, strings.ToLower(string(r.Operator)), strings.Join(r.Values, ","))
			}
			return fmt.Sprintf("have %s=%s (want %s %s)", r.Key, have, strings.ToLower(string(r.Operator)), strings.Join(r.Values, ","))
		}
	}
	if d := n.Description; d != nil {
		if c.minFreqHz > 0 && d.Hardware != nil && d.Hardware.CPU != nil && len(d.Hardware.CPU.Frequency) > 0 {
			if maxHz := maxOf(d.Hardware.CPU.Frequency); maxHz < c.minFreqHz {
				return fmt.Sprintf("run their CPU at most at %.2f GHz (want %.2f GHz)", float64(maxHz)/1e9, float64(c.minFreqHz)/1e9)
			}
		}
		if c.runtime != "" && len(d.Environment.ContainerRuntime) > 0 && !contains(d.Environment.ContainerRuntime, c.runtime) {
			return fmt.Sprintf("lack container runtime %s", c.runtime)
		}
	}
	if c.nvidiaRC && node.Labels[mlsysopsv1.LabelGPUPresent] != "true" {
		return "have no NVIDIA GPU for runtime class nvidia"
	}
	for i, want := range c.want {
		if want > 0 && st.alloc[i]-st.used[i] < want {
			return fmt.Sprintf("have insufficient %s", c.res[i])
		}
	}
	return ""
}

// score rates a feasible node from 0 to 100 for one more replica, given
// what is already used on it.
func (c *compiled) score(n *Node, st nodeState) int64 {
	// Spread CPU and memory: prefer the node left least allocated.
	least := 0.0
	for _, r := range []int{resCPU, resMemory} {
		if st.alloc[r] == 0 {
			continue
		}
		left := 1 - float64(st.used[r]+c.want[r])/float64(st.alloc[r])
		least += math.Max(0, left) / 2
	}
	total := 40 * least
	hasGPU := st.alloc[resGPU] > 0
	switch {
	case c.gpus > 0:
		// Pack GPU work: prefer the node it fills best, to keep whole
		// GPU nodes free for large jobs.
		fill := float64(st.used[resGPU]+c.want[resGPU]) / float64(st.alloc[resGPU])
		total += 40 * math.Min(1, fill)
	case hasGPU:
		// Keep GPU nodes for GPU work.
	default:
		total += 40
	}
	fpgaNode := n.Node.Labels[mlsysopsv1.LabelFPGAPresent] == "true"
	if c.fpga || !fpgaNode {
		total += 10
	}
	if d := n.Description; d != nil && d.Hardware != nil && d.Hardware.CPU != nil && d.Hardware.CPU.PerformanceIndicator != nil {
		// A little weight for faster CPUs, saturating at 4000.
		total += 10 * math.Min(1, *d.Hardware.CPU.PerformanceIndicator/4000)
	}
	return int64(math.Round(total))
}

// PlaceComponent chooses the nodes for a component's replicas: it filters
// the nodes that can take a replica, scores them, and assigns replicas one
// at a time to the best node given what earlier replicas used. It never
// modifies nodes.
func PlaceComponent(req Request, nodes []Node) (Decision, error) {
	d := Decision{Assignment: map[string]int32{}, Rejected: map[string]string{}, Scores: map[string]int64{}}
	c, err := compile(req)
	if err != nil {
		return d, err
	}
	replicas := req.Replicas
	if replicas <= 0 {
		replicas = Replicas(req.App, req.Component)
	}
	states := make([]nodeState, len(nodes))
	feasible := make([]bool, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if why, ok := req.Exclude[n.Name()]; ok {
			d.Rejected[n.Name()] = why
			continue
		}
		states[i] = c.state(n)
		if why := c.fits(n, states[i]); why != "" {
			d.Rejected[n.Name()] = why
			continue
		}
		feasible[i] = true
		d.Scores[n.Name()] = c.score(n, states[i])
	}
	for r := int32(0); r < replicas; r++ {
		best, bestScore := -1, int64(-1)
		for i := range nodes {
			if !feasible[i] {
				continue
			}
			if r > 0 && !c.hasRoom(states[i]) {
				continue
			}
			s := c.score(&nodes[i], states[i])
			if s > bestScore || (s == bestScore && nodes[i].Name() < nodes[best].Name()) {
				best, bestScore = i, s
			}
		}
		if best < 0 {
			d.Unplaced = replicas - r
			break
		}
		name := nodes[best].Name()
		if d.Assignment[name] == 0 {
			d.Nodes = append(d.Nodes, name)
		}
		d.Assignment[name]++
		for k, w := range c.want {
			states[best].used[k] += w
		}
	}
	return d, nil
}

// hasRoom reports whether a node that passed fits still has the resources
// for one more replica.
func (c *compiled) hasRoom(st nodeState) bool {
	for i, want := range c.want {
		if want > 0 && st.alloc[i]-st.used[i] < want {
			return false
		}
	}
	return true
}

// matches evaluates one node selector requirement against node labels,
// with the semantics of Kubernetes node affinity.
func matches(r corev1.NodeSelectorRequirement, labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return ok && contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !ok || !contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !ok {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

// checkRequirement rejects requirements node affinity would reject.
func checkRequirement(r corev1.NodeSelectorRequirement) error {
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			return fmt.Errorf("operator %s needs values", r.Operator)
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			return fmt.Errorf("operator %s takes no values", r.Operator)
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(r.Values) != 1 {
			return fmt.Errorf("operator %s needs one value", r.Operator)
		}
		if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
			return fmt.Errorf("operator %s needs an integer: %w", r.Operator, err)
		}
	default:
		return fmt.Errorf("unknown operator %q", r.Operator)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func maxOf(v []int64) int64 {
	m := v[0]
	for _, x := range v[1:] {
		m = max(m, x)
	}
	return m
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// NodesWithPods returns the nodes, sorted by name, each with the pods
// bound to it and what they request; pods that are done (Succeeded or
// Failed) or not bound do not count. The nodes and pods are referenced,
// not copied.
func NodesWithPods(nodes []corev1.Node, pods []corev1.Pod) []Node {
	requested := map[string]corev1.ResourceList{}
	bound := map[string][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		list := requested[p.Spec.NodeName]
		if list == nil {
			list = corev1.ResourceList{}
			requested[p.Spec.NodeName] = list
		}
		AddPodRequests(list, p)
		bound[p.Spec.NodeName] = append(bound[p.Spec.NodeName], p)
	}
	out := make([]Node, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		out[i] = Node{Node: n, Requested: requested[n.Name], Pods: bound[n.Name]}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// AddPodRequests adds what a pod requests, counted as the scheduler does:
// the sum of its containers, at least its largest init container, plus
// one pod.
func AddPodRequests(list corev1.ResourceList, pod *corev1.Pod) {
	total := corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		for name, q := range c.Resources.Requests {
			cur := total[name]
			cur.Add(q)
			total[name] = cur
		}
	}
	for _, c := range pod.Spec.InitContainers {
		for name, q := range c.Resources.Requests {
			if cur := total[name]; q.Cmp(cur) > 0 {
				total[name] = q.DeepCopy()
			}
		}
	}
	for name, q := range pod.Spec.Overhead {
		cur := total[name]
		cur.Add(q)
		total[name] = cur
	}
	for name, q := range total {
		cur := list[name]
		cur.Add(q)
		list[name] = cur
	}
	pods := list[corev1.ResourcePods]
	pods.Add(*resource.NewQuantity(1, resource.DecimalSI))
	list[corev1.ResourcePods] = pods
}

func tolerates(tols []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(t) {
			return true
		}
	}
	return false
}
