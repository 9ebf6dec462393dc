package mape

import "fmt"

// Discard reasons, also the values of the discards metric's reason label.
const (
	reasonConflict         = "conflict"
	reasonBusy             = "busy"
	reasonUnknownMechanism = "unknown_mechanism"
	reasonApplicationGone  = "application_removed"
	reasonPolicyGone       = "policy_removed"
	reasonInvalidPlan      = "invalid_plan"
	reasonStopped          = "stopped"
)

// discard is a plan the scheduler drops, with why.
type discard struct {
	p      *plan
	kind   string // one of the reason constants
	reason string // for people
}

// resolution is what one tick decides.
type resolution struct {
	scheduled []*plan
	deferred  []*plan
	discarded []discard
}

// resolve decides the fate of the plans queued for one tick, in order of
// arrival:
//
//   - plans for applications no longer managed are discarded;
//   - core plans are considered before the others and are never
//     discarded: one whose mechanism is taken waits for the next tick,
//     keeping its place;
//   - a plan claims all its mechanisms for the tick; a later plan that
//     needs one of them is discarded (first wins);
//   - a plan for a mechanism still executing a plan of the same
//     application (busy returns that plan's id) is discarded, so that
//     policies do not pile changes on a change in progress.
//
// busy(mechanism, app) returns the id of an executing plan or "".
func resolve(queue []*plan, busy func(mechanism, app string) string, managed func(app string) bool) resolution {
	ordered := make([]*plan, 0, len(queue))
	for _, p := range queue {
		if p.Core {
			ordered = append(ordered, p)
		}
	}
	for _, p := range queue {
		if !p.Core {
			ordered = append(ordered, p)
		}
	}
	var r resolution
	claimed := map[string]*plan{}
	for _, p := range ordered {
		if p.App != "" && !managed(p.App) {
			r.discarded = append(r.discarded, discard{p: p, kind: reasonApplicationGone, reason: fmt.Sprintf("application %s is no longer managed by this agent", p.App)})
			continue
		}
		kind, reason := "", ""
		for _, m := range p.mechanisms() {
			if other, ok := claimed[m]; ok {
				kind = reasonConflict
				reason = fmt.Sprintf("mechanism %s is already taken in this tick by plan %s of policy %s", m, other.ID, other.Policy)
				break
			}
			if id := busy(m, p.App); id != "" {
				kind = reasonBusy
				reason = fmt.Sprintf("mechanism %s is still executing plan %s for %s", m, id, appLabel(p.App))
				break
			}
		}
		if kind != "" {
			if p.Core {
				p.deferrals++
				p.Reason = "waiting: " + reason
				r.deferred = append(r.deferred, p)
			} else {
				r.discarded = append(r.discarded, discard{p: p, kind: kind, reason: reason})
			}
			continue
		}
		for _, m := range p.mechanisms() {
			claimed[m] = p
		}
		r.scheduled = append(r.scheduled, p)
	}
	return r
}

func appLabel(app string) string {
	if app == "" {
		return "the global policies"
	}
	return "application " + app
}
