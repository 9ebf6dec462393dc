package fluidity

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
)

// PermitPlacement checks a deploy, move or remove against the
// application's permitted_actions (mechanism.NewAppPermissions): each
// changes the nodes the component runs on, which upstream calls
// component_relocation. The deploys of an initial plan place the
// application as asked and need no permission; neither does change_spec
// (see PermitSpecChange).
func PermitPlacement(perms mechanism.Permissions, initial bool, a Action) error {
	switch {
	case a.Kind == ActionChangeSpec, initial && a.Kind == ActionDeploy:
		return nil
	case perms.Allows(mlsysopsv1.AppActionComponentRelocation):
		return nil
	}
	return perms.Forbidden(mlsysopsv1.AppActionComponentRelocation, "fluidity "+a.Kind)
}

// PermitSpecChange checks a change_spec that turns the component before
// into after against the application's permitted_actions: each changed
// field needs the action upstream names for it (SpecChangeActions), and
// a change no action names needs "*".
func PermitSpecChange(perms mechanism.Permissions, before, after *mlsysopsv1.Component) error {
	actions, other, err := SpecChangeActions(before, after)
	if err != nil {
		return err
	}
	for _, a := range actions {
		if !perms.Allows(a.Action) {
			return perms.Forbidden(a.Action, "change_spec of "+strings.Join(a.Fields, ", "))
		}
	}
	if len(other) > 0 && !perms.Allows(mechanism.ActionAll) {
		return perms.Forbidden(mechanism.ActionAll, "change_spec of "+strings.Join(other, ", ")+", which no narrower action covers")
	}
	return nil
}

// SpecAction is a permitted action a spec change needs and the fields
// that need it.
type SpecAction struct {
	Action string
	Fields []string
}

// containerActions maps container fields to the application action that
// permits changing them.
var containerActions = map[string]string{
	"image":                 mlsysopsv1.AppActionChangeContainerImage,
	"image_pull_policy":     mlsysopsv1.AppActionChangeContainerImage,
	"platform_requirements": mlsysopsv1.AppActionChangeContainerResourceRequirements,
	"acceleration_api":      mlsysopsv1.AppActionAcceleration,
}

// componentActions maps component fields (other than containers) to the
// application action that permits changing them.
var componentActions = map[string]string{
	"runtime_class_name": mlsysopsv1.AppActionChangeContainerRuntimeClass,
}

// SpecChangeActions lists, sorted by action, the permitted actions that
// changing the component from before to after needs, and the changed
// fields that no action names (other), such as a container's command or
// the component's node_placement.
func SpecChangeActions(before, after *mlsysopsv1.Component) (actions []SpecAction, other []string, err error) {
	b, err := toMap(before)
	if err != nil {
		return nil, nil, err
	}
	a, err := toMap(after)
	if err != nil {
		return nil, nil, err
	}
	byAction := map[string][]string{}
	note := func(field string, known map[string]string, key string) {
		if act, ok := known[key]; ok {
			byAction[act] = append(byAction[act], field)
		} else {
			other = append(other, field)
		}
	}
	bc, _ := b["containers"].([]any)
	ac, _ := a["containers"].([]any)
	if len(bc) != len(ac) {
		other = append(other, "containers (their number)")
	} else {
		for i := range bc {
			cb, _ := bc[i].(map[string]any)
			ca, _ := ac[i].(map[string]any)
			for _, k := range changedKeys(cb, ca) {
				note(fmt.Sprintf("containers[%d].%s", i, k), containerActions, k)
			}
		}
	}
	delete(b, "containers")
	delete(a, "containers")
	for _, k := range changedKeys(b, a) {
		note(k, componentActions, k)
	}
	for act, fields := range byAction {
		actions = append(actions, SpecAction{Action: act, Fields: fields})
	}
	sort.Slice(actions, func(i, j int) bool { return actions[i].Action < actions[j].Action })
	sort.Strings(other)
	return actions, other, nil
}

// changedKeys returns, sorted, the keys whose values differ between a and
// b (set in one only included).
func changedKeys(a, b map[string]any) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || !reflect.DeepEqual(v, w) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
