package agentconfig

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseFile feeds arbitrary files to the agent configuration loader
// (upstream YAML). Whatever the input it must not panic, and it either
// succeeds or returns an *Error whose every problem renders. Seeds: the
// files in testdata; crashers found by
//
//	go test ./internal/agentconfig -run '^$' -fuzz FuzzParseFile -fuzztime 60s
//
// are kept in testdata/fuzz/FuzzParseFile and replayed by every go test.
func FuzzParseFile(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o := NewOptions()
		warnings, err := o.ParseFile("fuzz.yaml", data)
		for _, w := range warnings {
			_ = w.String()
		}
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error is a %T, want *Error: %v", err, err)
		}
		if len(e.Problems) == 0 {
			t.Fatalf("an *Error without problems: %v", err)
		}
		_ = e.Error()
	})
}
