//go:build !nodeagent

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
)

// FluidityName is the cluster mechanism's name in plans (upstream).
const FluidityName = "fluidity"

// fluidityAdapter is the cluster's fluidity mechanism for plans from
// policies and node proxies: {name, deployment_plan: {component: [action,
// ...]}}. Placement itself belongs to the fluidity controller, which
// decides from the application's node_placement; the adapter checks plans
// against what the controller has placed. A deploy to a node the component
// already runs on succeeds; every action the controller would undo (a move,
// a remove or a spec change of a component the application still
// describes) fails with the reason, rather than being claimed done.
type fluidityAdapter struct {
	kc      client.Client
	cluster string
	log     *slog.Logger
}

var _ mechanism.Mechanism = (*fluidityAdapter)(nil)

func newFluidity(kc client.Client, cluster string, log *slog.Logger) *fluidityAdapter {
	return &fluidityAdapter{kc: kc, cluster: cluster, log: log}
}

// Apply implements mechanism.Mechanism.
func (f *fluidityAdapter) Apply(ctx context.Context, cmd map[string]any) (mechanism.Result, error) {
	app, _ := cmd["name"].(string)
	if app == "" {
		return mechanism.Result{}, errors.New("fluidity: command needs name (the application)")
	}
	plan, ok := cmd["deployment_plan"].(map[string]any)
	if !ok {
		return mechanism.Result{}, fmt.Errorf("fluidity: command for %s needs deployment_plan: {component: [actions]}", app)
	}
	var problems []string
	done := map[string]any{}
	comps := make([]string, 0, len(plan))
	for comp := range plan {
		if comp != "initial_plan" {
			comps = append(comps, comp)
		}
	}
	sort.Strings(comps)
	for _, comp := range comps {
		actions, ok := plan[comp].([]any)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: want a list of actions", comp))
			continue
		}
		for i, raw := range actions {
			act, ok := raw.(map[string]any)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s[%d]: want an object", comp, i))
				continue
			}
			var nodes []string
			if act["action"] == "deploy" {
				var err error
				if nodes, err = f.placedOn(ctx, app, comp); err != nil {
					problems = append(problems, fmt.Sprintf("%s[%d]: %v", comp, i, err))
					continue
				}
			}
			if msg := f.check(comp, act, nodes); msg != "" {
				problems = append(problems, fmt.Sprintf("%s[%d]: %s", comp, i, msg))
				continue
			}
			done[comp] = nodes
		}
	}
	if len(problems) > 0 {
		f.log.Warn("fluidity plan refused", "app", app, "plan", cmd[mechanism.PlanIDKey], "problems", problems)
		return mechanism.Result{}, fmt.Errorf("fluidity cannot execute the plan for %s: %s", app, strings.Join(problems, "; "))
	}
	return mechanism.Result{Status: mechanism.StatusSuccess, Detail: map[string]any{"placed": done}}, nil
}

// check returns why an action cannot be executed, or "" when the cluster
// already is in the state it asks for.
func (f *fluidityAdapter) check(comp string, act map[string]any, nodes []string) string {
	action, _ := act["action"].(string)
	str := func(k string) string { s, _ := act[k].(string); return s }
	switch action {
	case "deploy":
		host := str("host")
		if host == "" {
			return "deploy needs host"
		}
		if slices.Contains(nodes, host) {
			return ""
		}
		return fmt.Sprintf("deploy to %s: the placement controller put %s on %v; pin it with the application's node_placement.node", host, comp, nodes)
	case "move":
		if str("src_host") == "" || str("target_host") == "" {
			return "move needs src_host and target_host"
		}
		return fmt.Sprintf("move %s from %s to %s is not supported by the Go cluster agent yet: the placement controller owns placement; change node_placement in the application", comp, str("src_host"), str("target_host"))
	case "remove":
		return fmt.Sprintf("remove %s from %s is not supported yet: remove the component from the application", comp, str("host"))
	case "change_spec":
		return fmt.Sprintf("change_spec of %s is not supported yet: update the application", comp)
	case "":
		return "action is missing"
	}
	return fmt.Sprintf("unknown action %q (deploy, move, remove, change_spec)", action)
}

// placedOn returns the nodes the controller placed the component on.
func (f *fluidityAdapter) placedOn(ctx context.Context, app, comp string) ([]string, error) {
	var deps appsv1.DeploymentList
	if err := f.kc.List(ctx, &deps, client.InNamespace(fluidity.Namespace(app)), client.MatchingLabels{mlsysopsv1.LabelComponent: comp}); err != nil {
		return nil, fmt.Errorf("read placement: %w", err)
	}
	for _, d := range deps.Items {
		if v := d.Annotations[fluidity.AnnotationNodes]; v != "" {
			return strings.Split(v, ","), nil
		}
	}
	return nil, fmt.Errorf("component is not placed in cluster %s", f.cluster)
}

// State implements mechanism.Mechanism.
func (f *fluidityAdapter) State(context.Context) (map[string]any, error) {
	return map[string]any{"cluster": f.cluster}, nil
}

// Options implements mechanism.Mechanism.
func (f *fluidityAdapter) Options() map[string]any {
	return map[string]any{"actions": []any{"deploy", "move", "remove", "change_spec"}, "executes": []any{"deploy (when already placed)"}}
}

// clusterPlacementAdapter is the continuum's clusterPlacement mechanism:
// {action: {component: cluster}, app: [description]}, or with name. The
// Karmada placement controller decides the clusters (honouring the
// application's cluster_id); the adapter succeeds when the application
// already runs where the plan wants it and fails with the reason otherwise.
type clusterPlacementAdapter struct {
	kc  client.Client
	log *slog.Logger
}

var _ mechanism.Mechanism = (*clusterPlacementAdapter)(nil)

// ClusterPlacementName is the continuum mechanism's name in plans.
const ClusterPlacementName = "clusterPlacement"

// Apply implements mechanism.Mechanism.
func (p *clusterPlacementAdapter) Apply(ctx context.Context, cmd map[string]any) (mechanism.Result, error) {
	name, _ := cmd["name"].(string)
	if apps, ok := cmd["app"].([]any); ok && len(apps) > 0 && name == "" {
		if m, ok := apps[0].(map[string]any); ok {
			name, _ = m["name"].(string)
		}
	}
	want, ok := cmd["action"].(map[string]any)
	if name == "" || !ok || len(want) == 0 {
		return mechanism.Result{}, errors.New("clusterPlacement: command needs action {component: cluster} and the application (app or name)")
	}
	if p.kc == nil {
		return mechanism.Result{}, errors.New("clusterPlacement: no Karmada client")
	}
	app := &mlsysopsv1.MLSysOpsApp{}
	if err := p.kc.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: name}, app); err != nil {
		if apierrors.IsNotFound(err) {
			return mechanism.Result{}, fmt.Errorf("clusterPlacement: application %s does not exist in Karmada", name)
		}
		return mechanism.Result{}, fmt.Errorf("clusterPlacement: read %s: %w", name, err)
	}
	placed := map[string]string{}
	for _, cs := range app.Status.Components {
		placed[cs.Name] = cs.Cluster
	}
	var problems []string
	for comp, v := range want {
		cl, _ := v.(string)
		if placed[comp] != cl {
			problems = append(problems, fmt.Sprintf("%s: placed on %q, plan wants %q; the placement controller decides, set cluster_id in the application to pin it", comp, placed[comp], cl))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return mechanism.Result{}, fmt.Errorf("clusterPlacement cannot execute the plan for %s: %s", name, strings.Join(problems, "; "))
	}
	return mechanism.Result{Status: mechanism.StatusSuccess, Detail: map[string]any{"placed": placed}}, nil
}

// State implements mechanism.Mechanism.
func (p *clusterPlacementAdapter) State(context.Context) (map[string]any, error) {
	return map[string]any{}, nil
}

// Options implements mechanism.Mechanism.
func (p *clusterPlacementAdapter) Options() map[string]any {
	return map[string]any{"executes": []any{"confirm placement made by the Karmada placement controller"}}
}
