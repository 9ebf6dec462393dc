package cluster

import (
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// decide chooses the nodes of a component as choose does, with the
// replicas assumed for other components counted on their nodes, and
// assumes the component's replicas on the nodes chosen when they change.
// Decisions are made one at a time, so concurrent reconciles each see
// the others'.
func (r *AppReconciler) decide(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, cur *appsv1.Deployment, nodes *placement.Index, ov *fluidity.Override, full map[string]string) (chosen []string, why, unpinned string) {
	r.assumed.mu.Lock()
	defer r.assumed.mu.Unlock()
	now := time.Now()
	chosen, why, unpinned = r.choose(app, comp, cur, nodes, r.assumed.usage(nodes, app.Name, comp.Metadata.Name, now), ov, full)
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
// nodes whose agent is gone. assumed is counted on the nodes beyond their
// pods (placements of other components not visible yet).
func (r *AppReconciler) choose(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, cur *appsv1.Deployment, nodes *placement.Index, assumed placement.Usage, ov *fluidity.Override, full map[string]string) (chosen []string, why, unpinned string) {
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
		if unpinned = pinProblem(app, comp, ov.Nodes, ov.Replicas(&app.Spec, comp), nodes, assumed, gone); unpinned == "" {
			return ov.Nodes, "", ""
		}
	}
	req := placement.Request{App: &app.Spec, Component: comp, Extra: []placement.Usage{assumed}}
	if cur != nil && cur.Annotations[mlsysopsv1.AnnotationNodes] != "" {
		prev := strings.Split(cur.Annotations[mlsysopsv1.AnnotationNodes], ",")
		// The component's own pods stay counted on their nodes; placing it
		// on the same nodes again must not need twice the room.
		req.Own = placement.ComponentKey{App: app.Name, Component: comp.Metadata.Name}
		again := req
		again.Within = prev
		d, err := nodes.Place(again)
		if err == nil && d.Feasible() && allReady(nodes, prev) && noneIn(prev, gone) {
			return prev, "", unpinned
		}
		for _, n := range prev {
			if !nodes.Ready(n) {
				exclude[n] = "failed while hosting the component"
			}
		}
	}
	req.Exclude = exclude
	d, err := nodes.Place(req)
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

func noneIn(names []string, set map[string]string) bool {
	for _, n := range names {
		if _, ok := set[n]; ok {
			return false
		}
	}
	return true
}

// allReady reports whether every node named exists and is Ready.
func allReady(nodes *placement.Index, names []string) bool {
	for _, n := range names {
		if !nodes.Ready(n) {
			return false
		}
	}
	return true
}
