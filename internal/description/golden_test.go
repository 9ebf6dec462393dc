package description

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden parses every testdata/*.input.{yaml,json} file and compares
// the result with testdata/<name>.output.yaml (the object, in the custom
// resource form) or testdata/<name>.error.txt (every problem, one a line).
// Run with -update to rewrite them after a deliberate change, and review
// the diff.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.input.*")
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no golden inputs in testdata/")
	}
	for _, in := range inputs {
		base := filepath.Base(in)
		name := strings.SplitN(base, ".input.", 2)[0]
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			// The file name as a user would have it: node-2.yaml, not
			// node-2.input.yaml.
			file := name + filepath.Ext(base)
			obj, errs := Parse(file, data)
			outFile := filepath.Join("testdata", name+".output.yaml")
			errFile := filepath.Join("testdata", name+".error.txt")
			var got, golden string
			if len(errs) > 0 {
				if obj != nil {
					t.Errorf("Parse returned an object together with %d problems", len(errs))
				}
				var lines []string
				for _, p := range ProblemsFrom(file, errs) {
					lines = append(lines, p.String())
				}
				got, golden = strings.Join(lines, "\n")+"\n", errFile
			} else {
				out, err := yaml.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				got, golden = string(out), outFile
				// A parsed object must pass the same rules when validated
				// as a typed object, as agents do with objects they read
				// from the apiserver.
				if verrs := Validate(obj); len(verrs) > 0 {
					t.Errorf("Validate(parsed object) = %v", verrs)
				}
			}
			if *update {
				_ = os.Remove(outFile)
				_ = os.Remove(errFile)
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden file (run go test -run TestGolden -update to create it): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s differs (-want +got):\n%s", golden, diff)
			}
		})
	}
}
