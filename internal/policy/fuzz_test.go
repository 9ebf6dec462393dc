package policy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzCompile feeds arbitrary policy files to the loader (the sandbox's
// rewriting, the Starlark compiler, initialize() and its configuration)
// and runs analyze and plan of what loads. Whatever the source, nothing
// may panic and every failure is an *Error located in the file. Seeds:
// the example and built-in policies; crashers found by
//
//	go test ./internal/policy -run '^$' -fuzz FuzzCompile -fuzztime 60s
//
// are kept in testdata/fuzz/FuzzCompile and replayed by every go test.
func FuzzCompile(f *testing.F) {
	var files []string
	for _, pattern := range []string{"../../policies/*/*.star", "../../policies/*.star", "builtin/*/*.star", "builtin/*.star"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		f.Fatal("no seed policies found")
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Add([]byte(header + passAnalyzePlan))
	rt := Runtime{Limits: Limits{MaxSteps: 20_000, Timeout: time.Second, MaxMemory: 16 << 20, MaxDepth: 50}, Logger: quiet()}
	f.Fuzz(func(t *testing.T, src []byte) {
		ctx := context.Background()
		s, err := Compile(ctx, "fuzz", "policy-fuzz.star", src, rt)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error is a %T, want *Error: %v", err, err)
			}
			return
		}
		inst, err := s.NewInstance(ctx)
		if err != nil {
			return
		}
		in := &Inputs{Applications: []map[string]any{{"name": "a"}}, System: map[string]any{"MLSysOpsNode": map[string]any{"name": "n"}}}
		if _, err := inst.Analyze(ctx, in); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("analyze error is a %T, want *Error: %v", err, err)
			}
		}
		if _, err := inst.Plan(ctx, in); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("plan error is a %T, want *Error: %v", err, err)
			}
		}
		if _, err := inst.Context(); err != nil {
			t.Logf("context: %v", err)
		}
	})
}
