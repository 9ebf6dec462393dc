package cluster

import (
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// decide chooses the nodes of a component as choose does, with the
// replicas assumed for other components counted on their nodes, and
// assumes the component's replicas on the nodes chosen when they change.
// Decisions are made one at a time, so concurrent reconciles each see
// the others'.
func (r *AppReconciler) decide(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, cur *appsv1.Deployment, nodes []placement.Node, ov *fluidity.Override, full map[string]string) (chosen []string, why, unpinned string) {
	r.assumed.mu.Lock()
	defer r.assumed.mu.Unlock()
	now := time.Now()
	chosen, why, unpinned = r.choose(app, comp, cur, r.assumed.onto(nodes, app.Name, comp.Metadata.Name, now), ov, full)
	if replicas := ov.Replicas(&app.Spec, comp); len(chosen) > 0 && replicas > 0 && !sameNodes(chosen, runningOn(cur)) {
		r.assumed.add(app.Name, comp.Metadata.Name, chosen, replicas, placement.PodRequests(comp), now)
	}
	return chosen, why, unpinned
}

// choose returns the nodes for a component (comp as it runs) or why there
// are none. A stopped component keeps its last nodes; nodes a plan pinned
// are kept while they fit the component, and unpinned says why not; other
// components keep their current nodes while these are Ready and still fit
// them, and are placed afresh otherwise. full names nodes kube-scheduler
// found full for the component, with its reason: they are avoided like
// nodes whose agent is gone.
func (r *AppReconciler) choose(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, cur *appsv1.Deployment, nodes []placement.Node, ov *fluidity.Override, full map[string]string) (chosen []string, why, unpinned string) {
	gone := maps.Clone(full)
	if gone == nil {
		gone = map[string]string{}
	}
	if r.Unavailable != nil {
		maps.Copy(gone, r.Unavailable())
	}
	exclude := maps.Clone(gone)
	if ov != nil && ov.Stopped && len(ov.Nodes) > 0 {
		return ov.Nodes, "", ""
	}
	if ov.Pinned() {
		if unpinned = pinProblem(app, comp, ov.Nodes, ov.Replicas(&app.Spec, comp), nodes, gone); unpinned == "" {
			return ov.Nodes, "", ""
		}
	}
	if cur != nil && cur.Annotations[mlsysopsv1.AnnotationNodes] != "" {
		prev := strings.Split(cur.Annotations[mlsysopsv1.AnnotationNodes], ",")
		// The component's own pods stay counted on their nodes; placing it
		// on the same nodes again must not need twice the room.
		own := withoutComponent(nodes, app.Name, comp.Metadata.Name)
		d, err := placement.PlaceComponent(placement.Request{App: &app.Spec, Component: comp}, restrict(own, prev))
		if err == nil && d.Feasible() && allReadyNodes(nodes, prev) && noneIn(prev, gone) {
			return prev, "", unpinned
		}
		for _, n := range prev {
			if !ready(nodes, n) {
				exclude[n] = "failed while hosting the component"
			}
		}
		nodes = own
	}
	d, err := placement.PlaceComponent(placement.Request{App: &app.Spec, Component: comp, Exclude: exclude}, nodes)
	if err != nil {
		return nil, err.Error(), unpinned
	}
	if !d.Feasible() {
		if len(d.Nodes) > 0 {
			// Run what fits; the message says what does not.
			return d.Nodes, "", unpinned
		}
		return nil, d.Reason(), unpinned
	}
	return d.Nodes, "", unpinned
}

// runningOn returns the nodes a component's Deployment runs it on: none
// when a plan removed it from all of them.
func runningOn(dep *appsv1.Deployment) []string {
	if dep == nil || dep.Annotations[mlsysopsv1.AnnotationNodes] == "" {
		return nil
	}
	if ov, _ := fluidity.ReadOverride(dep.Annotations); ov != nil && ov.Stopped {
		return nil
	}
	return strings.Split(dep.Annotations[mlsysopsv1.AnnotationNodes], ",")
}

// sameNodes reports whether a and b name the same nodes.
func sameNodes(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// withoutComponent returns the nodes with the requests of a component's
// own pods removed.
func withoutComponent(nodes []placement.Node, app, comp string) []placement.Node {
	out := make([]placement.Node, len(nodes))
	for i, n := range nodes {
		out[i] = n
		var mine []*corev1.Pod
		for _, p := range n.Pods {
			if p.Labels[mlsysopsv1.LabelApp] == app && p.Labels[mlsysopsv1.LabelComponent] == comp {
				mine = append(mine, p)
			}
		}
		if len(mine) == 0 {
			continue
		}
		// Subtracted rather than summed afresh: Requested may hold more
		// than the pods (replicas assumed for other components).
		own := corev1.ResourceList{}
		for _, p := range mine {
			placement.AddPodRequests(own, p)
		}
		req := corev1.ResourceList{}
		for name, q := range n.Requested {
			q = q.DeepCopy()
			q.Sub(own[name])
			req[name] = q
		}
		out[i].Requested = req
	}
	return out
}

func restrict(nodes []placement.Node, names []string) []placement.Node {
	var out []placement.Node
	for _, n := range nodes {
		for _, want := range names {
			if n.Name() == want {
				out = append(out, n)
			}
		}
	}
	return out
}

func ready(nodes []placement.Node, name string) bool {
	for _, n := range nodes {
		if n.Name() == name {
			for _, c := range n.Node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status == corev1.ConditionTrue
				}
			}
		}
	}
	return false
}

func noneIn(names []string, set map[string]string) bool {
	for _, n := range names {
		if _, ok := set[n]; ok {
			return false
		}
	}
	return true
}

func allReadyNodes(nodes []placement.Node, names []string) bool {
	for _, n := range names {
		if !ready(nodes, n) {
			return false
		}
	}
	return true
}
