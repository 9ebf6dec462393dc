// Package policystore keeps the agents' policy files, per layer, where the
// agents load them from: the policy ConfigMaps that are mounted into the
// agents' pods (continuum on the Karmada host cluster; cluster and node in
// the Karmada API, propagated to every member cluster), or plain
// directories for agents that run as local processes. Agents watch these
// folders and hot-reload what changes (internal/policy).
//
// Sources are checked before they are stored: the file name must be
// policy-<name>.star and the text must be Starlark that defines
// initialize, analyze and plan at the top level.
package policystore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"go.starlark.net/syntax"

	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// ErrNotFound: no such policy.
var ErrNotFound = errors.New("not found")

// MaxSourceSize bounds one policy file; a ConfigMap holds at most 1 MiB
// for all its policies.
const MaxSourceSize = 256 << 10

// Store keeps policy files per layer.
type Store interface {
	// List returns the layer's policies, sorted by name, without source.
	List(ctx context.Context, layer string) ([]api.Policy, error)
	// Get returns one policy with its source.
	Get(ctx context.Context, layer, name string) (api.Policy, error)
	// Put creates or replaces a policy and reports whether it is new.
	Put(ctx context.Context, layer, name string, source []byte) (bool, error)
	// Delete removes a policy; ErrNotFound when there is none.
	Delete(ctx context.Context, layer, name string) error
}

var nameRE = regexp.MustCompile(`^policy-[A-Za-z0-9][A-Za-z0-9_-]{0,100}\.star$`)

// ValidName reports whether name is a policy file name: policy-<name>.star.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Check validates a policy: its name, its size, its syntax and its three
// entry points. It returns every problem found, with field paths "name"
// and "source".
func Check(name string, source []byte) []api.FieldProblem {
	var out []api.FieldProblem
	if !ValidName(name) {
		out = append(out, api.FieldProblem{Field: "name", Type: "FieldValueInvalid",
			Message: fmt.Sprintf("Invalid value: %q: policy files are named policy-<name>.star (letters, digits, - and _)", name)})
	}
	switch {
	case len(source) == 0:
		return append(out, api.FieldProblem{Field: "source", Type: "FieldValueRequired", Message: "Required value: the policy is empty"})
	case len(source) > MaxSourceSize:
		return append(out, api.FieldProblem{Field: "source", Type: "FieldValueTooLong",
			Message: fmt.Sprintf("Too long: %d bytes; a policy may have at most %d", len(source), MaxSourceSize)})
	}
	f, err := syntax.Parse(name, source, 0)
	if err != nil {
		var se syntax.Error
		msg := err.Error()
		if errors.As(err, &se) {
			msg = fmt.Sprintf("line %d, column %d: %s", se.Pos.Line, se.Pos.Col, se.Msg)
		}
		return append(out, api.FieldProblem{Field: "source", Type: "FieldValueInvalid", Message: "Invalid value: not valid Starlark: " + msg})
	}
	defined := map[string]int{}
	for _, st := range f.Stmts {
		if d, ok := st.(*syntax.DefStmt); ok {
			defined[d.Name.Name] = len(d.Params)
		}
	}
	for _, fn := range []struct {
		name   string
		params int
	}{{"initialize", 0}, {"analyze", 6}, {"plan", 6}} {
		n, ok := defined[fn.name]
		switch {
		case !ok:
			out = append(out, api.FieldProblem{Field: "source", Type: "FieldValueRequired",
				Message: fmt.Sprintf("Required value: a policy defines %s() at the top level", fn.name)})
		case n != fn.params:
			out = append(out, api.FieldProblem{Field: "source", Type: "FieldValueInvalid",
				Message: fmt.Sprintf("Invalid value: %s takes %d parameter(s), the policy's takes %d", fn.name, fn.params, n)})
		}
	}
	return out
}

// sortPolicies orders policies by name.
func sortPolicies(ps []api.Policy) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
}

// isPolicyKey tells policy files from other keys or files.
func isPolicyKey(k string) bool {
	return strings.HasPrefix(k, "policy-") && strings.HasSuffix(k, ".star")
}
