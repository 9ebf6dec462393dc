package mape

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// planBuilder makes queued plans for scheduler tests.
type planBuilder struct{ p *plan }

func makePlan(id string) *planBuilder {
	return &planBuilder{p: &plan{PlanRecord: PlanRecord{ID: id, Policy: "policy-" + id, State: StateQueued, Plan: map[string]any{}}, outcomes: map[string]*outcome{}}}
}
func (b *planBuilder) App(app string) *planBuilder { b.p.App = app; return b }
func (b *planBuilder) Core() *planBuilder          { b.p.Core = true; return b }
func (b *planBuilder) Mechanisms(ms ...string) *planBuilder {
	for _, m := range ms {
		b.p.Plan[m] = map[string]any{}
		b.p.outcomes[m] = &outcome{MechanismOutcome: MechanismOutcome{Status: StatusWaiting}}
	}
	return b
}
func (b *planBuilder) Obj() *plan { return b.p }

func TestResolve(t *testing.T) {
	type want struct {
		Scheduled []string
		Deferred  []string
		Discarded map[string]string // id -> reason
	}
	cases := map[string]struct {
		queue   []*plan
		busy    map[string]string // mechanism+"/"+app -> executing plan
		managed []string
		want    want
	}{
		"first plan wins a mechanism within a tick": {
			queue: []*plan{
				makePlan("a").App("x").Mechanisms("fluidity").Obj(),
				makePlan("b").App("y").Mechanisms("fluidity").Obj(),
				makePlan("c").App("x").Mechanisms("CPUFrequencyConfigurator").Obj(),
			},
			managed: []string{"x", "y"},
			want: want{
				Scheduled: []string{"a", "c"},
				Discarded: map[string]string{"b": "mechanism fluidity is already taken in this tick by plan a of policy policy-a"},
			},
		},
		"core plans go first and are never discarded": {
			queue: []*plan{
				makePlan("user").App("x").Mechanisms("fluidity").Obj(),
				makePlan("static").App("x").Core().Mechanisms("fluidity").Obj(),
				makePlan("dynamic").App("x").Core().Mechanisms("fluidity").Obj(),
			},
			managed: []string{"x"},
			want: want{
				Scheduled: []string{"static"},
				Deferred:  []string{"dynamic"},
				Discarded: map[string]string{"user": "mechanism fluidity is already taken in this tick by plan static of policy policy-static"},
			},
		},
		"a mechanism busy for the same application": {
			queue: []*plan{
				makePlan("move").App("x").Mechanisms("fluidity").Obj(),
				makePlan("place").App("x").Core().Mechanisms("fluidity").Obj(),
				makePlan("other-app").App("y").Mechanisms("fluidity").Obj(),
			},
			busy:    map[string]string{"fluidity/x": "earlier"},
			managed: []string{"x", "y"},
			want: want{
				Scheduled: []string{"other-app"},
				Deferred:  []string{"place"},
				Discarded: map[string]string{"move": "mechanism fluidity is still executing plan earlier for application x"},
			},
		},
		"a plan is all or nothing": {
			queue: []*plan{
				makePlan("cpu").Mechanisms("CPUFrequencyConfigurator").Obj(),
				makePlan("both").Mechanisms("GPUConfigurator", "CPUFrequencyConfigurator").Obj(),
				makePlan("gpu").Mechanisms("GPUConfigurator").Obj(),
			},
			want: want{
				Scheduled: []string{"cpu", "gpu"},
				Discarded: map[string]string{"both": "mechanism CPUFrequencyConfigurator is already taken in this tick by plan cpu of policy policy-cpu"},
			},
		},
		"global plans need no application (upstream discarded them)": {
			queue: []*plan{makePlan("global").Mechanisms("CPUFrequencyConfigurator").Obj()},
			want:  want{Scheduled: []string{"global"}},
		},
		"plans of removed applications": {
			queue: []*plan{
				makePlan("gone").App("old").Mechanisms("fluidity").Obj(),
				makePlan("gone-core").App("old").Core().Mechanisms("fluidity").Obj(),
				makePlan("next").App("x").Mechanisms("fluidity").Obj(),
			},
			managed: []string{"x"},
			want: want{
				Scheduled: []string{"next"},
				Discarded: map[string]string{
					"gone":      "application old is no longer managed by this agent",
					"gone-core": "application old is no longer managed by this agent",
				},
			},
		},
		"deferred core plans keep their order": {
			queue: []*plan{
				makePlan("c1").App("x").Core().Mechanisms("fluidity").Obj(),
				makePlan("c2").App("x").Core().Mechanisms("fluidity").Obj(),
				makePlan("c3").App("x").Core().Mechanisms("fluidity").Obj(),
			},
			managed: []string{"x"},
			want:    want{Scheduled: []string{"c1"}, Deferred: []string{"c2", "c3"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			managed := map[string]bool{}
			for _, a := range tc.managed {
				managed[a] = true
			}
			res := resolve(tc.queue,
				func(m, app string) string { return tc.busy[m+"/"+app] },
				func(app string) bool { return managed[app] })
			var got want
			for _, p := range res.scheduled {
				got.Scheduled = append(got.Scheduled, p.ID)
			}
			for _, p := range res.deferred {
				got.Deferred = append(got.Deferred, p.ID)
			}
			for _, d := range res.discarded {
				if got.Discarded == nil {
					got.Discarded = map[string]string{}
				}
				got.Discarded[d.p.ID] = d.reason
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("resolution (-want +got):\n%s", diff)
			}
		})
	}
}

// A core plan deferred tick after tick is scheduled as soon as its
// mechanism is free: it is never starved by later plans.
func TestCoreNeverStarved(t *testing.T) {
	managed := func(string) bool { return true }
	free := func(string, string) string { return "" }
	waiting := makePlan("core").App("x").Core().Mechanisms("fluidity").Obj()
	queue := []*plan{makePlan("first").App("x").Core().Mechanisms("fluidity").Obj(), waiting}
	res := resolve(queue, free, managed)
	if len(res.deferred) != 1 || res.deferred[0] != waiting {
		t.Fatalf("deferred = %v", res.deferred)
	}
	// Next tick: the executing plan keeps the mechanism busy; new non-core
	// plans keep arriving and are discarded; the core plan waits.
	busy := func(m, app string) string { return "first" }
	res = resolve(append(res.deferred, makePlan("user").App("x").Mechanisms("fluidity").Obj()), busy, managed)
	if len(res.deferred) != 1 || len(res.discarded) != 1 || res.discarded[0].p.ID != "user" {
		t.Fatalf("second tick: %+v", res)
	}
	// Then the mechanism is free again and the core plan goes first.
	res = resolve(append(res.deferred, makePlan("user2").App("x").Mechanisms("fluidity").Obj()), free, managed)
	if len(res.scheduled) != 1 || res.scheduled[0] != waiting || waiting.deferrals != 2 {
		t.Fatalf("third tick: scheduled %v, deferrals %d", res.scheduled, waiting.deferrals)
	}
}
