package policy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The sandbox's rewriting keeps what ordinary policies compute.
func TestSandboxKeepsSemantics(t *testing.T) {
	src := `
def initialize():
    d = {"n": 3, "l": [1]}
    d["n"] *= 2
    x = 5
    x *= 3
    x %= 4
    s = "ab"
    s *= 2
    l = [1, 2]
    l.extend([3])
    l.extend(range(2))
    sq = (lambda v: v * v)(4)
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)
    return {"scope": "global", "configuration": {"analyze_interval": "10s"},
            "out": [d["n"], x, s, 2 * [0], "%d-%s" % (7, "z"), "{}+{}".format(1, 2),
                    "-".join(["a", "b"]), "aXa".replace("a", "bb"), l, sq, fact(5),
                    list(range(3)), sorted([3, 1]), max(1, 4), 7.5 * 2, "%%" % ()]}
` + passAnalyzePlan
	s := mustCompile(t, src, Runtime{})
	inst, err := s.NewInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, err := inst.Context()
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(6), int64(3), "abab", []any{int64(0), int64(0)}, "7-z", "1+2", "a-b", "bbXbb",
		[]any{int64(1), int64(2), int64(3), int64(0), int64(1)}, int64(16), int64(120),
		[]any{int64(0), int64(1), int64(2)}, []any{int64(1), int64(3)}, int64(4), 15.0, "%"}
	if diff := cmp.Diff(want, got["out"]); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

// Each single step that would build a huge value is refused before it
// allocates, with the limit in the message.
func TestSandboxRefusesHugeSteps(t *testing.T) {
	cases := map[string]struct {
		stmt string
		want error
	}{
		"list repeat":       {"x = [0] * (1 << 30)", ErrMemoryLimit},
		"int times string":  {"x = (1 << 62) * 'ab'", ErrMemoryLimit},
		"bigint repeat":     {"x = 'a' * (1 << 80)", ErrMemoryLimit},
		"tuple repeat":      {"x = (1, 2) * (1 << 30)", ErrMemoryLimit},
		"augmented repeat":  {"x = 'a'\n    x *= 1 << 40", ErrMemoryLimit},
		"list of a range":   {"x = list(range(1 << 40))", ErrMemoryLimit},
		"any over a range":  {"x = any([False] * 3) or all(range(1, 1 << 62))", ErrMemoryLimit},
		"join with big sep": {"x = ('s' * 4096).join(['a'] * 100000)", ErrMemoryLimit},
		"replace amplifies": {"s = 'a' * 20000\n    x = s.replace('a', s)", ErrMemoryLimit},
		"format amplifies":  {"s = 'a' * 20000\n    x = ('{}' * 20000).format(*([s] * 20000))", ErrMemoryLimit},
		"percent amplifies": {"s = 'a' * 20000\n    x = ('%s' * 20000) % tuple([s] * 20000)", ErrMemoryLimit},
		"extend with range": {"x = []\n    x.extend(range(1 << 40))", ErrMemoryLimit},
		"endless recursion": {"f = lambda n: f(n + 1)\n    f(0)", ErrDepthLimit},
		"recursion via def": {"def g(n):\n        return g(n)\n    g(0)", ErrDepthLimit},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := "def initialize():\n    " + tc.stmt + "\n    return {\"scope\": \"global\", \"configuration\": {\"analyze_interval\": \"10s\"}}\n" + passAnalyzePlan
			_, err := compile(t, src, Runtime{Limits: Limits{MaxMemory: 16 << 20}})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), ": initialize: stopped: ") {
				t.Errorf("err = %q, want it to say initialize was stopped", err)
			}
		})
	}
}
