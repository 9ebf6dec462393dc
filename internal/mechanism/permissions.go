package mechanism

import (
	"errors"
	"fmt"
	"strings"
)

// Node actions named in MLSysOpsNode permitted_actions that this
// package's mechanisms need.
const (
	ActionCPUFrequency = "cpu_frequency"
	ActionGPUFrequency = "gpu_frequency"
	ActionSetPowerCap  = "set_power_cap"
	// ActionAll permits every action.
	ActionAll = "*"
)

// ErrForbidden is wrapped by errors for actions that a node's or an
// application's permitted_actions do not allow.
var ErrForbidden = errors.New("action not permitted")

// Permissions are the permitted_actions of a node or of an application.
// The zero value permits nothing: a node that lists no actions allows no
// node-level changes.
type Permissions struct {
	all    bool
	set    map[string]bool
	listed []string
	// app is the application the permissions are of; empty for a node.
	app string
}

// NewPermissions returns the permissions for a node's permitted_actions
// list; "*" permits everything.
func NewPermissions(actions []string) Permissions {
	p := Permissions{set: map[string]bool{}, listed: append([]string(nil), actions...)}
	for _, a := range actions {
		if a == ActionAll {
			p.all = true
		}
		p.set[a] = true
	}
	return p
}

// NewAppPermissions returns the permissions for the permitted_actions of
// application app. Unlike a node's, an absent (empty) list permits
// everything, as upstream, which never restricts plans on applications.
func NewAppPermissions(app string, actions []string) Permissions {
	p := NewPermissions(actions)
	p.all = p.all || len(actions) == 0
	p.app = app
	return p
}

// AllowAll returns permissions that permit everything (for agents above
// the node level, where permitted_actions do not apply).
func AllowAll() Permissions { return NewPermissions([]string{ActionAll}) }

// Allows tells whether action is permitted.
func (p Permissions) Allows(action string) bool { return p.all || p.set[action] }

// Require returns a *ForbiddenError for the first action not permitted.
func (p Permissions) Require(actions ...string) error {
	for _, a := range actions {
		if !p.Allows(a) {
			return p.Forbidden(a, "")
		}
	}
	return nil
}

// Forbidden returns the error that refuses action; why, when set, says
// what needed it.
func (p Permissions) Forbidden(action, why string) *ForbiddenError {
	return &ForbiddenError{Action: action, Permitted: append([]string(nil), p.listed...), App: p.app, Why: why}
}

// ForbiddenError is an action refused because of permitted_actions.
type ForbiddenError struct {
	// Action is the refused action (e.g. cpu_frequency,
	// component_relocation).
	Action string
	// Permitted is the node's or the application's permitted_actions.
	Permitted []string
	// App is the application whose permitted_actions refused the action;
	// empty when the node's did.
	App string
	// Why says what in the plan needed the action; may be empty.
	Why string
}

// Error says what was refused and how to allow it.
func (e *ForbiddenError) Error() string {
	listed := "none"
	if len(e.Permitted) > 0 {
		listed = strings.Join(e.Permitted, ", ")
	}
	why := ""
	if e.Why != "" {
		why = " (" + e.Why + ")"
	}
	if e.App == "" {
		return fmt.Sprintf("action %s%s is not permitted on this node (permitted_actions: %s); add %q or \"*\" to permitted_actions in the node's MLSysOpsNode description to allow it", e.Action, why, listed, e.Action)
	}
	hint := fmt.Sprintf("add %q or \"*\"", e.Action)
	if e.Action == ActionAll {
		hint = `add "*"`
	}
	return fmt.Sprintf("action %s%s is not permitted on application %s (permitted_actions: %s); %s to permitted_actions in the application's MLSysOpsApp description to allow it", e.Action, why, e.App, listed, hint)
}

// Unwrap makes errors.Is(err, ErrForbidden) true.
func (e *ForbiddenError) Unwrap() error { return ErrForbidden }
