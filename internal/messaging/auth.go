package messaging

import (
	"fmt"
	"sort"
	"sync"

	"mellium.im/xmpp/jid"
)

// Role is what a peer is to this agent.
type Role int

// Roles of peers.
const (
	RoleUnknown Role = iota
	RoleParent
	RoleController
	RoleChild
)

// String returns the role's name.
func (r Role) String() string {
	switch r {
	case RoleParent:
		return "parent"
	case RoleController:
		return "controller"
	case RoleChild:
		return "child"
	}
	return "unknown"
}

// peers is the set of JIDs this agent trusts, by role.
type peers struct {
	mu              sync.RWMutex
	parent          string
	controllers     map[string]bool
	children        map[string]bool
	acceptSubscribe func(string) bool
}

func newPeers(parent string, controllers, children []string, acceptSubscribe func(string) bool) *peers {
	p := &peers{parent: parent, controllers: map[string]bool{}, children: map[string]bool{}, acceptSubscribe: acceptSubscribe}
	for _, c := range controllers {
		p.controllers[c] = true
	}
	for _, c := range children {
		p.children[c] = true
	}
	return p
}

func (p *peers) role(j string) Role {
	p.mu.RLock()
	defer p.mu.RUnlock()
	switch {
	case j == "":
		return RoleUnknown
	case j == p.parent:
		return RoleParent
	case p.children[j]:
		return RoleChild
	case p.controllers[j]:
		return RoleController
	}
	return RoleUnknown
}

func (p *peers) addChild(j string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.children[j] {
		return false
	}
	p.children[j] = true
	return true
}

func (p *peers) removeChild(j string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.children[j] {
		return false
	}
	delete(p.children, j)
	return true
}

func (p *peers) childList() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]string, 0, len(p.children))
	for c := range p.children {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// authorize decides whether a message of type spec from `from` may reach a
// handler. correlated is true when it answers a request we sent to `from`.
// keep reports whether the sender is someone we track stream state for; a
// refused message from such a peer still takes its place in the stream and
// is refused in the ack, so the sender learns at once. Messages from
// strangers are dropped without any answer.
func (p *peers) authorize(from string, spec Spec, correlated bool) (keep bool, reason string) {
	role := p.role(from)
	keep = role != RoleUnknown
	if correlated {
		return true, ""
	}
	switch spec.Direction {
	case DirectionDown:
		if role == RoleParent || role == RoleController {
			return keep, ""
		}
		return keep, fmt.Sprintf("%s is a command and %s (%s) is neither the parent nor a controller", spec.Type, from, role)
	case DirectionUp:
		if role == RoleChild {
			return keep, ""
		}
		if spec.Type == TypeSubscribe && role == RoleUnknown && p.acceptSubscribe != nil && p.acceptSubscribe(from) {
			return true, ""
		}
		return keep, fmt.Sprintf("%s is a report and %s (%s) is not a known child", spec.Type, from, role)
	case DirectionAny:
		if role != RoleUnknown {
			return keep, ""
		}
		return keep, fmt.Sprintf("%s from unknown peer %s", spec.Type, from)
	}
	return keep, fmt.Sprintf("%s is not accepted outside a request/response exchange", spec.Type)
}

// bareJID parses s and returns its bare, normalized form.
func bareJID(s string) (string, error) {
	j, err := jid.Parse(s)
	if err != nil {
		return "", fmt.Errorf("parse JID %q: %w", s, err)
	}
	if j.Localpart() == "" {
		return "", fmt.Errorf("JID %q has no local part", s)
	}
	return j.Bare().String(), nil
}
