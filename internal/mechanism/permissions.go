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

// ErrForbidden is wrapped by errors for actions the node does not permit.
var ErrForbidden = errors.New("action not permitted on this node")

// Permissions are a node's permitted_actions. The zero value permits
// nothing: a node that lists no actions allows no node-level changes.
type Permissions struct {
	all    bool
	set    map[string]bool
	listed []string
}

// NewPermissions returns the permissions for a permitted_actions list;
// "*" permits everything.
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

// AllowAll returns permissions that permit everything (for agents above
// the node level, where permitted_actions do not apply).
func AllowAll() Permissions { return NewPermissions([]string{ActionAll}) }

// Allows tells whether action is permitted.
func (p Permissions) Allows(action string) bool { return p.all || p.set[action] }

// Require returns a *ForbiddenError for the first action not permitted.
func (p Permissions) Require(actions ...string) error {
	for _, a := range actions {
		if !p.Allows(a) {
			return &ForbiddenError{Action: a, Permitted: append([]string(nil), p.listed...)}
		}
	}
	return nil
}

// ForbiddenError is an action refused because of permitted_actions.
type ForbiddenError struct {
	// Action is the refused action (e.g. cpu_frequency).
	Action string
	// Permitted is the node's permitted_actions.
	Permitted []string
}

// Error says what was refused and how to allow it.
func (e *ForbiddenError) Error() string {
	listed := "none"
	if len(e.Permitted) > 0 {
		listed = strings.Join(e.Permitted, ", ")
	}
	return fmt.Sprintf("action %s is not permitted on this node (permitted_actions: %s); add %q or \"*\" to permitted_actions in the node's MLSysOpsNode description to allow it", e.Action, listed, e.Action)
}

// Unwrap makes errors.Is(err, ErrForbidden) true.
func (e *ForbiddenError) Unwrap() error { return ErrForbidden }
