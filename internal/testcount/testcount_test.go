package testcount

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScan(t *testing.T) {
	got, err := Scan(filepath.Join("testdata", "mod"), "example.org/mod")
	if err != nil {
		t.Fatal(err)
	}
	want := []Func{
		{Dir: "pure", Name: "BenchmarkPure", Type: "Benchmark", Kind: Unit},
		{Dir: "pure", Name: "TestPure", Type: "Test", Kind: Unit},
		{Dir: "real", Name: "FuzzReal", Type: "Fuzz", Kind: Integration},
		{Dir: "real", Name: "TestAlone", Type: "Test", Kind: Unit},
		{Dir: "real", Name: "TestThroughTwoHelpers", Type: "Test", Kind: Integration},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tests (-want +got):\n%s", diff)
	}
	doc := "intro\n<!-- testcount -->\nold\n<!-- /testcount -->\nend\n"
	out, err := Render(doc, got)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"3 test functions: **2 unit tests** of pure logic (with fakes at most) and **1 integration tests**", "| `pure/` | 1 | 0 |", "| `real/` | 1 | 1 |", "\nend\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("rendered section lacks %q:\n%s", s, out)
		}
	}
	if _, err := Render("no section", got); err == nil {
		t.Error("a document without the section was accepted")
	}
}

// The README's counts are those of the code.
func TestReadmeCounts(t *testing.T) {
	root := filepath.Join("..", "..")
	funcs, err := Scan(root, "github.com/mlsysops-go/mlsysops")
	if err != nil {
		t.Fatal(err)
	}
	b, err := readFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Render(b, funcs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, got); diff != "" {
		t.Errorf("README.md's test counts are stale (run make test-count) (-README +counted):\n%s", diff)
	}
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
