package messaging

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestServersRotation: a client moves to the next node when a connection
// attempt fails or its server goes away, backs off only after a whole
// round failed, and a fleet spreads over the nodes.
func TestServersRotation(t *testing.T) {
	type step struct {
		op        string // "fail", "ok", "moveOn"
		wantRound bool   // for "fail": a round is done
		wantNext  string // the address tried next
	}
	cases := map[string]struct {
		addrs []string
		steps []step
	}{
		"one server stays and backs off at every failure": {
			addrs: []string{"a:1"},
			steps: []step{{op: "fail", wantRound: true, wantNext: "a:1"}, {op: "moveOn", wantNext: "a:1"}},
		},
		"two servers: the other one at once, a backoff after both failed": {
			addrs: []string{"a:1", "b:1"},
			steps: []step{
				{op: "fail", wantRound: false, wantNext: "b:1"},
				{op: "fail", wantRound: true, wantNext: "a:1"},
				{op: "fail", wantRound: false, wantNext: "b:1"},
				{op: "ok", wantNext: "b:1"},
				{op: "moveOn", wantNext: "a:1"},
				{op: "fail", wantRound: false, wantNext: "b:1"},
			},
		},
		"three servers: a session in between starts a new round": {
			addrs: []string{"a:1", "b:1", "c:1"},
			steps: []step{
				{op: "fail", wantRound: false, wantNext: "b:1"},
				{op: "ok", wantNext: "b:1"},
				{op: "fail", wantRound: false, wantNext: "c:1"},
				{op: "fail", wantRound: false, wantNext: "a:1"},
				{op: "fail", wantRound: true, wantNext: "b:1"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newServers(tc.addrs, "x")
			s.cur = 0 // the start is the hash's; the sequence is what is checked
			for i, st := range tc.steps {
				switch st.op {
				case "fail":
					if got := s.connectFailed(); got != st.wantRound {
						t.Errorf("step %d: round done = %v, want %v", i, got, st.wantRound)
					}
				case "ok":
					s.connected()
				case "moveOn":
					s.moveOn()
				}
				if got := s.current(); got != st.wantNext {
					t.Errorf("step %d (%s): next = %s, want %s", i, st.op, got, st.wantNext)
				}
			}
		})
	}
}

// TestServersSpread: clients with different identities start on different
// nodes, and one identity always starts on the same node.
func TestServersSpread(t *testing.T) {
	addrs := []string{"a:1", "b:1"}
	got := map[string]int{}
	for _, id := range []string{"node-1@d/agent", "node-2@d/agent", "node-3@d/agent", "node-4@d/agent", "node-5@d/agent", "node-6@d/agent", "node-7@d/agent", "node-8@d/agent"} {
		first := newServers(addrs, id).current()
		if again := newServers(addrs, id).current(); again != first {
			t.Fatalf("%s starts on %s, then on %s", id, first, again)
		}
		got[first]++
	}
	if diff := cmp.Diff(2, len(got)); diff != "" {
		t.Errorf("nodes used by 8 agents (-want +got):\n%s\n%v", diff, got)
	}
}
