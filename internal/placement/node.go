package placement

import (
	"fmt"
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
	// Within, when not nil, restricts the choice to these nodes.
	Within []string
	// Own names the component's pods (its application's object name and
	// the component's): placing it again, they do not count against the
	// nodes they run on.
	Own ComponentKey
	// Extra is counted on the nodes beyond what their pods request:
	// placements not visible yet, earlier components of the application.
	Extra []Usage
	// Explain fills the decision's Rejected and Scores for every node
	// even when every replica is placed; otherwise Scores holds the
	// chosen nodes and Rejected is filled only when some replica does
	// not fit (then Reason needs it). Explaining costs a reason string
	// per rejected node.
	Explain bool
}

// ComponentKey names a component of an application object.
type ComponentKey struct{ App, Component string }

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
	// the first reason; filled when some replica is unplaced or with
	// Request.Explain.
	Rejected map[string]string
	// Scores of the feasible nodes for the first replica (0-100): of
	// every feasible node with Request.Explain, else of the chosen ones.
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
