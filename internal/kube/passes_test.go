package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPasses(t *testing.T) {
	p := NewPasses()
	if got := p.Last("a"); got != "" {
		t.Errorf("Last before any pass = %q", got)
	}
	p.Done("a", "10")
	p.Done("b", "12")
	p.Done("a", "15")
	p.Forget("b")
	if diff := cmp.Diff(map[string]string{"a": "15"}, p.Snapshot()); diff != "" {
		t.Errorf("Snapshot (-want +got):\n%s", diff)
	}
	snap := p.Snapshot()
	snap["a"] = "0"
	if p.Last("a") != "15" {
		t.Error("a snapshot shares the record")
	}
}

func TestSameOrNewer(t *testing.T) {
	cases := map[string]struct {
		rv, since string
		want      bool
	}{
		"newer":             {"100", "99", true},
		"same":              {"100", "100", true},
		"older":             {"99", "100", false},
		"more digits":       {"1000", "999", true},
		"none yet":          {"", "5", false},
		"not a revision":    {"abc", "5", false},
		"since not numeric": {"5", "x", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SameOrNewer(tc.rv, tc.since); got != tc.want {
				t.Errorf("SameOrNewer(%q, %q) = %v, want %v", tc.rv, tc.since, got, tc.want)
			}
		})
	}
}
