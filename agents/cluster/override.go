package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// readIndex reads the cluster's nodes, pods and MLSysOpsNode descriptions
// (CPU frequencies, container runtimes) into a placement index, for checks
// that must see the latest state rather than a cache's.
func readIndex(ctx context.Context, c client.Reader) (*placement.Index, error) {
	var nl corev1.NodeList
	if err := c.List(ctx, &nl, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var pl corev1.PodList
	if err := c.List(ctx, &pl, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	idx := placement.NewIndex()
	for i := range nl.Items {
		idx.UpsertNode(&nl.Items[i])
	}
	for i := range pl.Items {
		idx.UpsertPod(&pl.Items[i])
	}
	var ml mlsysopsv1.MLSysOpsNodeList
	if err := c.List(ctx, &ml, client.InNamespace(mlsysopsv1.Namespace), client.UnsafeDisableDeepCopy); err == nil {
		for i := range ml.Items {
			if ml.Items[i].Namespace == mlsysopsv1.Namespace {
				idx.SetDescription(ml.Items[i].Name, &ml.Items[i].Spec)
			}
		}
	}
	return idx, nil
}

// pinProblem says why a component (as it runs, comp) cannot run on the
// pinned nodes, or "" when it can: every node must exist, have a live
// agent (gone lists those that do not), pass placement's filters and have
// room for a replica, and together they must hold all its replicas. The
// component's own pods do not count against the nodes they run on;
// assumed counts beyond the nodes' pods.
//
// One decision over the pinned nodes answers both, from one reading of
// the index: its Rejected are the nodes that cannot take a replica. (Read
// twice, a node that went NotReady in between was once named as a node
// too small.)
func pinProblem(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, pinned []string, replicas int32, nodes *placement.Index, assumed placement.Usage, gone map[string]string) string {
	var problems []string
	for _, n := range pinned {
		if why, ok := gone[n]; ok {
			problems = append(problems, fmt.Sprintf("node %s: %s", n, why))
		} else if !nodes.Has(n) {
			problems = append(problems, fmt.Sprintf("node %s is not a node of this cluster", n))
		}
	}
	if len(problems) > 0 {
		return strings.Join(problems, "; ")
	}
	d, err := nodes.Place(placement.Request{App: &app.Spec, Component: comp, Own: placement.ComponentKey{App: app.Name, Component: comp.Metadata.Name},
		Extra: []placement.Usage{assumed}, Replicas: replicas, Within: pinned, Explain: true})
	if err != nil {
		return err.Error()
	}
	for _, n := range pinned {
		if why, ok := d.Rejected[n]; ok {
			one := placement.Decision{Rejected: map[string]string{n: why}}
			problems = append(problems, fmt.Sprintf("node %s is not eligible: %s", n, one.Reason()))
		}
	}
	if len(problems) > 0 {
		return strings.Join(problems, "; ")
	}
	if !d.Feasible() {
		return fmt.Sprintf("nodes %v cannot hold %d replicas: %s", pinned, replicas, d.Reason())
	}
	return ""
}

// currentOverride reads the override of a component from its Deployment
// (nil when there is none or the Deployment does not exist yet) and
// drops what the application invalidated: when the application changed
// the component since the plan, its change_spec and remove go (the user's
// new spec wins); pinned nodes stay while they still fit, which choose
// checks. dropped says what was dropped and why, for the Deployment's
// AnnotationOverrideDropped.
func currentOverride(comp *mlsysopsv1.Component, dep *appsv1.Deployment, log *slog.Logger) (ov *fluidity.Override, dropped string) {
	if dep == nil {
		return nil, ""
	}
	ov, err := fluidity.ReadOverride(dep.Annotations)
	if err != nil {
		log.Warn("unreadable placement override dropped", "component", comp.Metadata.Name, "err", err)
		return nil, "unreadable override: " + err.Error()
	}
	if ov == nil {
		return nil, ""
	}
	if base := fluidity.SpecHash(comp); ov.Base != base {
		var parts []string
		if ov.Spec != nil {
			parts = append(parts, "change_spec")
			ov.Spec = nil
		}
		if ov.Stopped {
			// The nodes of a stopped component are only where it last ran.
			parts = append(parts, "remove")
			ov.Stopped, ov.Nodes = false, nil
		}
		if len(parts) > 0 {
			why := "the application changed the component"
			log.Info("placement override dropped", "component", comp.Metadata.Name, "plan", ov.Plan, "dropped", parts, "reason", why)
			dropped = fmt.Sprintf("%s: %s dropped: %s", ov.Plan, strings.Join(parts, " and "), why)
		}
		ov.Base = base
	}
	if ov.Empty() {
		return nil, dropped
	}
	return ov, dropped
}

// overrideMessage describes an override for the component's status.
func overrideMessage(ov *fluidity.Override) string {
	var parts []string
	switch {
	case ov.Stopped:
		parts = append(parts, "stopped")
	case ov.Pinned():
		parts = append(parts, fmt.Sprintf("pinned to %v", ov.Nodes))
	}
	if ov.Spec != nil {
		parts = append(parts, "spec changed")
	}
	return fmt.Sprintf("%s by plan %s", strings.Join(parts, ", "), ov.Plan)
}
