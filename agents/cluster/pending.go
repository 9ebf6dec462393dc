package cluster

import (
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// DefaultPendingSettle is how long a component's pod may stay
// unschedulable on the nodes chosen for it before the controller
// chooses again.
const DefaultPendingSettle = 30 * time.Second

// assumeFor bounds how long a placement counts against its nodes while
// its pods do not show.
const assumeFor = 30 * time.Second

// assumed is what the controller has placed and cannot see yet, like
// kube-scheduler's assume cache: the replicas of a placement just written
// count against the free capacity of their nodes for other components
// until their pods show on them or assumeFor passes, so that concurrent
// reconciles do not all choose one node on the same stale view.
type assumed struct {
	mu      sync.Mutex
	entries map[string]assumption // by app/component
}

type assumption struct {
	app, comp string
	// perNode is how many replicas each node takes: kube-scheduler
	// spreads them evenly (see fluidity.Render).
	perNode map[string]int32
	perPod  corev1.ResourceList
	until   time.Time
}

// add assumes replicas of a component, each requesting perPod, on nodes.
// The caller holds mu.
func (a *assumed) add(app, comp string, nodes []string, replicas int32, perPod corev1.ResourceList, now time.Time) {
	if a.entries == nil {
		a.entries = map[string]assumption{}
	}
	e := assumption{app: app, comp: comp, perNode: map[string]int32{}, perPod: perPod, until: now.Add(assumeFor)}
	n := int32(len(nodes))
	for i, node := range nodes {
		e.perNode[node] = replicas / n
		if int32(i) < replicas%n {
			e.perNode[node]++
		}
	}
	a.entries[app+"/"+comp] = e
}

// usage returns what the replicas assumed for components other than
// app/comp, and not yet visible on their nodes, take there. Entries whose
// pods all show, or that are too old, go. The caller holds mu.
func (a *assumed) usage(nodes *placement.Index, app, comp string, now time.Time) placement.Usage {
	out := placement.Usage{}
	for key, e := range a.entries {
		if now.After(e.until) {
			delete(a.entries, key)
			continue
		}
		shown := true
		for node, want := range e.perNode {
			if !nodes.Has(node) {
				continue
			}
			missing := want - nodes.LivePods(node, e.app, e.comp)
			if missing <= 0 {
				continue
			}
			shown = false
			if e.app == app && e.comp == comp {
				continue
			}
			out.Add(node, e.perPod, int64(missing))
		}
		if shown {
			delete(a.entries, key)
		}
	}
	return out
}

// forget drops what is assumed for an application.
func (a *assumed) forget(app string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, e := range a.entries {
		if e.app == app {
			delete(a.entries, key)
		}
	}
}

// unschedulableOn returns the nodes chosen for a component (as its
// Deployment cur says) on which kube-scheduler has left one of its pods
// Pending as Unschedulable for at least settle, with the scheduler's
// reason: they are full for it, whatever the free capacity the
// controller computes (the node filled up behind its back, or with what
// it does not model). A node the pod as admitted can never go to (an
// admission webhook or policy engine added a node affinity, a node
// selector or took a toleration away that the node does not satisfy) is
// returned at once, without waiting for settle: no freed capacity will
// change that; and so are the cluster's other nodes (names) that the
// pod's admitted constraints, but for the hostnames the controller
// rendered, exclude too: the next choice is one the pod can go to,
// rather than the next node the same admission refuses (the testbed's
// webhook keeps foreign images off its real nodes: a first application
// went from one real node to another, a pass each, before a KWOK node).
// nodes looks the cluster's nodes up by name (nil: none known). recheck
// is how soon to look again: when a pod Pending for less than that
// settles, or after settle while the component is not ready; zero when
// it is.
func unschedulableOn(pods []corev1.Pod, cur *appsv1.Deployment, nodes func(name string) *corev1.Node, names func() []string, settle time.Duration, now time.Time) (full map[string]string, recheck time.Duration) {
	chosen := runningOn(cur)
	if len(chosen) == 0 {
		return nil, 0
	}
	soon := func(d time.Duration) {
		if recheck == 0 || d < recheck {
			recheck = d
		}
	}
	if cur.Spec.Replicas != nil && cur.Status.ReadyReplicas < *cur.Spec.Replicas {
		// Pods may be Pending that this pass does not see yet, and no
		// event tells when they have waited long enough.
		soon(settle)
	}
	for i := range pods {
		p := &pods[i]
		// Pods of an earlier placement are not the current nodes' fault.
		if p.Spec.NodeName != "" || !p.DeletionTimestamp.IsZero() || !slices.Equal(hostnames(p), chosen) {
			continue
		}
		if refused := refusedAtAdmission(p, chosen, nodes); len(refused) > 0 {
			if full == nil {
				full = map[string]string{}
			}
			for n, why := range refused {
				full[n] = why
			}
			if names != nil {
				for n, why := range refusedAtAdmission(withoutHostnames(p), names(), nodes) {
					full[n] = why
				}
			}
			continue
		}
		var cond *corev1.PodCondition
		for j := range p.Status.Conditions {
			if p.Status.Conditions[j].Type == corev1.PodScheduled {
				cond = &p.Status.Conditions[j]
			}
		}
		if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != corev1.PodReasonUnschedulable {
			soon(settle) // not tried yet
			continue
		}
		if left := settle - now.Sub(cond.LastTransitionTime.Time); left > 0 {
			soon(left)
			continue
		}
		if full == nil {
			full = map[string]string{}
		}
		for _, n := range chosen {
			full[n] = "could not take a replica (kube-scheduler: " + cond.Message + ")"
		}
	}
	return full, recheck
}

// refusedAtAdmission returns the nodes among chosen that the pod, as the
// apiserver admitted it, can never be scheduled on, with why: its
// required node affinity and node selector (which include the hostnames
// the controller rendered, and whatever admission added) do not match
// the node's labels, or the node has a NoSchedule or NoExecute taint the
// pod does not tolerate.
func refusedAtAdmission(p *corev1.Pod, chosen []string, nodes func(name string) *corev1.Node) map[string]string {
	if nodes == nil {
		return nil
	}
	var out map[string]string
	affinity := nodeaffinity.GetRequiredNodeAffinity(p)
	for _, name := range chosen {
		n := nodes(name)
		if n == nil {
			continue
		}
		why := ""
		if ok, err := affinity.Match(n); err != nil || !ok {
			why = "the pod as admitted cannot go there: its required node affinity or node selector does not match the node's labels"
		} else if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(n.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}); untolerated {
			why = fmt.Sprintf("the pod as admitted cannot go there: it does not tolerate the node's taint %s", taint.ToString())
		}
		if why == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = why
	}
	return out
}

// withoutHostnames returns a copy of p whose required node affinity no
// longer names hosts (the nodes the controller chose): what else the pod
// as admitted requires of a node.
func withoutHostnames(p *corev1.Pod) *corev1.Pod {
	q := p.DeepCopy()
	a := q.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return q
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = slices.DeleteFunc(terms[i].MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == corev1.LabelHostname
		})
	}
	return q
}

// hostnames returns, sorted, the nodes a pod's required node affinity
// allows by hostname (fluidity.Render writes them).
func hostnames(p *corev1.Pod) []string {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Key == mlsysopsv1.LabelHostname && r.Operator == corev1.NodeSelectorOpIn {
				out := slices.Clone(r.Values)
				slices.Sort(out)
				return out
			}
		}
	}
	return nil
}

// rememberFull is how long a node that kube-scheduler found full for a
// component stays avoided for it. Without a memory, a component that two
// nodes cannot take moves between them for ever: each new placement
// knows only the nodes of the one before.
const rememberFull = 5 * time.Minute

// refusals remembers, per component, the nodes kube-scheduler left its
// pods unschedulable on (unschedulableOn), each for rememberFull.
type refusals struct {
	mu      sync.Mutex
	entries map[componentKey]map[string]refusal
}

type componentKey struct{ app, comp string }

type refusal struct {
	reason string
	until  time.Time
}

// note remembers the nodes of full for app/comp and returns every node
// remembered for it, with its reason; entries older than rememberFull go.
func (f *refusals) note(app, comp string, full map[string]string, now time.Time) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := componentKey{app, comp}
	nodes := f.entries[key]
	for node, reason := range full {
		if nodes == nil {
			nodes = map[string]refusal{}
		}
		nodes[node] = refusal{reason: reason, until: now.Add(rememberFull)}
	}
	var out map[string]string
	for node, r := range nodes {
		if now.After(r.until) {
			delete(nodes, node)
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[node] = r.reason
	}
	switch {
	case len(nodes) > 0:
		if f.entries == nil {
			f.entries = map[componentKey]map[string]refusal{}
		}
		f.entries[key] = nodes
	default:
		delete(f.entries, key)
	}
	return out
}

// forget drops what is remembered for an application.
func (f *refusals) forget(app string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key := range f.entries {
		if key.app == app {
			delete(f.entries, key)
		}
	}
}
