package fluidity

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// Override is what fluidity plans changed in one component relative to
// what its application asks for: the nodes it runs on (move, deploy,
// remove) and its spec (change_spec). The placement controller honours it
// at every pass until it is dropped: the application changes the
// component (the user wins), or a pinned node stops being Ready or
// eligible (the controller then places the component as usual).
type Override struct {
	// Plan is the plan that set the override last.
	Plan string `json:"plan"`
	// Base is SpecHash of the application's component when the override
	// was set; a different hash means the application changed it.
	Base string `json:"base"`
	// Nodes are the nodes the component runs on; with Stopped, the nodes
	// it last ran on.
	Nodes []string `json:"nodes,omitempty"`
	// Stopped means a remove took the component off its last node: it
	// keeps its Deployment, with no replicas.
	Stopped bool `json:"stopped,omitempty"`
	// Spec replaces the application's component (change_spec).
	Spec *mlsysopsv1.Component `json:"spec,omitempty"`
}

// ReadOverride returns the override recorded in a Deployment's
// annotations, nil when there is none.
func ReadOverride(annotations map[string]string) (*Override, error) {
	v, ok := annotations[mlsysopsv1.AnnotationOverride]
	if !ok || v == "" {
		return nil, nil
	}
	o := &Override{}
	if err := json.Unmarshal([]byte(v), o); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", mlsysopsv1.AnnotationOverride, err)
	}
	if len(o.Nodes) == 0 {
		// "nodes": [] and no nodes are one override (Encode writes
		// neither), so that reading what Encode wrote gives it back.
		o.Nodes = nil
	}
	return o, nil
}

// Encode returns the override as the value of mlsysopsv1.AnnotationOverride.
func (o *Override) Encode() string {
	b, err := json.Marshal(o)
	if err != nil {
		// Plain data always marshals.
		panic(err)
	}
	return string(b)
}

// Empty reports whether the override changes nothing.
func (o *Override) Empty() bool {
	return o == nil || (len(o.Nodes) == 0 && !o.Stopped && o.Spec == nil)
}

// Pinned reports whether the override fixes the nodes the component runs
// on.
func (o *Override) Pinned() bool { return o != nil && len(o.Nodes) > 0 && !o.Stopped }

// Copy returns a deep copy; the copy of nil is an empty override.
func (o *Override) Copy() *Override {
	if o == nil {
		return &Override{}
	}
	c := *o
	c.Nodes = slices.Clone(o.Nodes)
	if o.Spec != nil {
		c.Spec = o.Spec.DeepCopy()
	}
	return &c
}

// Effective returns the component as it runs: the override's spec, else
// the application's.
func (o *Override) Effective(comp *mlsysopsv1.Component) *mlsysopsv1.Component {
	if o != nil && o.Spec != nil {
		return o.Spec
	}
	return comp
}

// Replicas is the number of replicas the component runs with: none when
// stopped, at least one per pinned node, else what it asks for.
func (o *Override) Replicas(app *mlsysopsv1.MLSysOpsAppSpec, comp *mlsysopsv1.Component) int32 {
	n := placement.Replicas(app, comp)
	switch {
	case o == nil:
	case o.Stopped:
		n = 0
	case o.Pinned():
		n = max(n, int32(len(o.Nodes)))
	}
	return n
}

// Running returns the nodes the component runs on under the override,
// given the nodes the placement controller chose (current).
func (o *Override) Running(current []string) []string {
	switch {
	case o == nil:
		return current
	case o.Stopped:
		return nil
	case o.Pinned():
		return o.Nodes
	}
	return current
}

// Step applies one deploy, move or remove to the override, given the
// nodes the placement controller chose (current). It reports whether the
// override changed; a deploy to a node the component already runs on
// changes nothing.
func (o *Override) Step(act Action, current []string) (bool, error) {
	running := o.Running(current)
	switch act.Kind {
	case ActionDeploy:
		if slices.Contains(running, act.Host) {
			return false, nil
		}
		o.Nodes = sortedSet(append(slices.Clone(running), act.Host))
		o.Stopped = false
	case ActionMove:
		if act.SrcHost == act.TargetHost {
			return false, fmt.Errorf("move from %s to itself", act.SrcHost)
		}
		if !slices.Contains(running, act.SrcHost) {
			return false, fmt.Errorf("move from %s: the component runs on %s", act.SrcHost, describeNodes(running))
		}
		o.Nodes = sortedSet(append(without(running, act.SrcHost), act.TargetHost))
	case ActionRemove:
		if !slices.Contains(running, act.Host) {
			return false, fmt.Errorf("remove from %s: the component runs on %s", act.Host, describeNodes(running))
		}
		if rest := without(running, act.Host); len(rest) > 0 {
			o.Nodes = rest
		} else {
			// The Deployment stays, with no replicas, so that the
			// controller does not place the component again.
			o.Nodes, o.Stopped = sortedSet(running), true
		}
	default:
		return false, fmt.Errorf("%s is not a placement action", act.Kind)
	}
	return true, nil
}

func describeNodes(nodes []string) string {
	if len(nodes) == 0 {
		return "no node (it was removed; deploy it first)"
	}
	return "[" + strings.Join(nodes, ", ") + "]"
}

func without(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

func sortedSet(list []string) []string {
	out := slices.Clone(list)
	sort.Strings(out)
	return slices.Compact(out)
}

// Fluidity actions (upstream deployment_plan entries).
const (
	ActionDeploy     = "deploy"
	ActionMove       = "move"
	ActionRemove     = "remove"
	ActionChangeSpec = "change_spec"
)

// Action is one entry of a component's list in a deployment plan.
type Action struct {
	// Kind is deploy, move, remove or change_spec.
	Kind string
	// Host is the node of deploy, remove and change_spec.
	Host string
	// SrcHost and TargetHost are the nodes of move.
	SrcHost, TargetHost string
	// NewSpec is the component spec of change_spec: the whole component
	// or the fields to change (merged into the current spec; lists are
	// replaced, null deletes).
	NewSpec map[string]any
}

// Plan is a fluidity command: {name, deployment_plan: {component:
// [actions], initial_plan}}.
type Plan struct {
	// App is the application (name).
	App string
	// Initial marks an initial placement (initial_plan).
	Initial bool
	// Components maps each component to its actions, in order.
	Components map[string][]Action
	// Reason is the policy's own account of why it planned this
	// (optional "reason"); it goes into the mechanism's events.
	Reason string
}

// String describes an action for events and logs: "move edge-1 ->
// edge-2", "deploy on edge-1", "remove from edge-1", "change_spec".
func (a Action) String() string {
	switch a.Kind {
	case ActionMove:
		return fmt.Sprintf("move %s -> %s", a.SrcHost, a.TargetHost)
	case ActionDeploy:
		return "deploy on " + a.Host
	case ActionRemove:
		return "remove from " + a.Host
	case ActionChangeSpec:
		if a.Host != "" {
			return "change_spec on " + a.Host
		}
	}
	return a.Kind
}

// ParsePlan reads and checks a fluidity command; the error lists every
// problem.
func ParsePlan(cmd map[string]any) (*Plan, error) {
	p := &Plan{Components: map[string][]Action{}}
	p.App, _ = cmd["name"].(string)
	p.Reason, _ = cmd["reason"].(string)
	if p.App == "" {
		return nil, errors.New("fluidity: the command needs name (the application)")
	}
	dp, ok := cmd["deployment_plan"].(map[string]any)
	if !ok || len(dp) == 0 {
		return nil, fmt.Errorf("fluidity: the command for %s needs deployment_plan: {component: [actions]}", p.App)
	}
	var problems []string
	comps := make([]string, 0, len(dp))
	for k := range dp {
		comps = append(comps, k)
	}
	sort.Strings(comps)
	for _, comp := range comps {
		if comp == "initial_plan" {
			b, ok := dp[comp].(bool)
			if !ok {
				problems = append(problems, "initial_plan: want true or false")
			}
			p.Initial = b
			continue
		}
		list, ok := dp[comp].([]any)
		if !ok || len(list) == 0 {
			problems = append(problems, fmt.Sprintf("%s: want a list of actions", comp))
			continue
		}
		for i, raw := range list {
			act, err := parseAction(raw)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s[%d]: %v", comp, i, err))
				continue
			}
			p.Components[comp] = append(p.Components[comp], act)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("fluidity: bad plan for %s: %s", p.App, strings.Join(problems, "; "))
	}
	return p, nil
}

func parseAction(raw any) (Action, error) {
	m, ok := raw.(map[string]any)
	if !ok {
		return Action{}, errors.New("want an object {action: ...}")
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	a := Action{Kind: str("action"), Host: str("host"), SrcHost: str("src_host"), TargetHost: str("target_host")}
	switch a.Kind {
	case ActionDeploy, ActionRemove:
		if a.Host == "" {
			return a, fmt.Errorf("%s needs host", a.Kind)
		}
	case ActionMove:
		if a.SrcHost == "" || a.TargetHost == "" {
			return a, errors.New("move needs src_host and target_host")
		}
	case ActionChangeSpec:
		spec, ok := m["new_spec"].(map[string]any)
		if !ok || len(spec) == 0 {
			return a, errors.New("change_spec needs new_spec (the component's spec, or the fields to change)")
		}
		a.NewSpec = spec
	case "":
		return a, errors.New("action is missing (deploy, move, remove, change_spec)")
	default:
		return a, fmt.Errorf("unknown action %q (deploy, move, remove, change_spec)", a.Kind)
	}
	return a, nil
}

// ChangeSpec merges a change_spec's new_spec into the component as it runs
// (cur) and checks the result as part of the application, with the rules
// the northbound API applies to descriptions. The component keeps its
// name.
func ChangeSpec(app *mlsysopsv1.MLSysOpsApp, cur *mlsysopsv1.Component, newSpec map[string]any) (*mlsysopsv1.Component, error) {
	base, err := toMap(cur)
	if err != nil {
		return nil, err
	}
	merged := mergePatch(base, newSpec)
	name := cur.Metadata.Name
	if md, _ := merged["metadata"].(map[string]any); md == nil || md["name"] != name {
		return nil, fmt.Errorf("new_spec must keep the component's name %s (metadata.name)", name)
	}
	spec, err := toMap(&app.Spec)
	if err != nil {
		return nil, err
	}
	spec["name"] = app.Name
	comps, _ := spec["components"].([]any)
	idx := -1
	for i, c := range comps {
		if md, _ := c.(map[string]any)["metadata"].(map[string]any); md != nil && md["name"] == name {
			comps[i], idx = merged, i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("%s is not a component of %s", name, app.Name)
	}
	doc, err := json.Marshal(map[string]any{mlsysopsv1.KindApp: spec})
	if err != nil {
		return nil, err
	}
	parsed, errs := description.ParseApp(doc, description.FormatJSON)
	if len(errs) > 0 {
		return nil, fmt.Errorf("new_spec of %s is not valid: %v", name, errs.ToAggregate())
	}
	return &parsed.Spec.Components[idx], nil
}

// mergePatch applies an RFC 7386 merge patch: objects merge key by key,
// null deletes a key, anything else replaces.
func mergePatch(doc, patch map[string]any) map[string]any {
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		out[k] = v
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(out, k)
		case map[string]any:
			dv, _ := out[k].(map[string]any)
			out[k] = mergePatch(dv, pv)
		default:
			out[k] = v
		}
	}
	return out
}

func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}
