package benchfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseLine(t *testing.T) {
	cases := map[string]struct {
		line  string
		procs int
		want  []Figure
	}{
		"go test": {
			line: "BenchmarkPair/reliable-oneway-2   \t   20000\t  51234 ns/op\t  1523 msgs/s\t 1.000 acks/msg", procs: 2,
			want: []Figure{
				{Benchmark: "BenchmarkPair/reliable-oneway", Value: 51234, Unit: "ns/op", Iterations: 20000, Procs: 2},
				{Benchmark: "BenchmarkPair/reliable-oneway", Value: 1523, Unit: "msgs/s", Iterations: 20000, Procs: 2},
				{Benchmark: "BenchmarkPair/reliable-oneway", Value: 1, Unit: "acks/msg", Iterations: 20000, Procs: 2},
			},
		},
		"a name ending in a number, one proc": {
			line: "BenchmarkSubmissionToRunning/burst-500 1 2.5 apps/s", procs: 1,
			want: []Figure{{Benchmark: "BenchmarkSubmissionToRunning/burst-500", Value: 2.5, Unit: "apps/s", Iterations: 1, Procs: 1}},
		},
		"the testbed's line": {
			line: "BenchmarkTestbed/clusters=2,nodes=8 \t1\t95.1 cold-up-s\t3.2 warm-up-s", procs: 2,
			want: []Figure{
				{Benchmark: "BenchmarkTestbed/clusters=2,nodes=8", Value: 95.1, Unit: "cold-up-s", Iterations: 1, Procs: 2},
				{Benchmark: "BenchmarkTestbed/clusters=2,nodes=8", Value: 3.2, Unit: "warm-up-s", Iterations: 1, Procs: 2},
			},
		},
		"the name alone":      {line: "BenchmarkPair/reliable-oneway", procs: 2},
		"a log line":          {line: "    bench_test.go:12: connected 1000 agents", procs: 2},
		"an odd field":        {line: "BenchmarkX-2 10 5 ns/op 7", procs: 2},
		"a value that is not": {line: "BenchmarkX-2 10 fast ns/op", procs: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ParseLine(tc.line, tc.procs)
			if ok != (tc.want != nil) {
				t.Fatalf("ParseLine ok = %v", ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("figures (-want +got):\n%s", diff)
			}
		})
	}
}

// The test2json stream of a real `go test -json -bench` run: the result
// line is split after the benchmark's name, logs come before it.
func TestCollectorReadsTest2JSON(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "test2json.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)
	load := Load{Load1: 3.5, Load5: 2, Load15: 1, CPUs: 2}
	var got []Figure
	var echo strings.Builder
	c := &Collector{Command: "go test -json -bench .", Procs: 2, Echo: &echo,
		Now: func() time.Time { return at }, ReadLoad: func() Load { return load },
		Found: func(f Figure) { got = append(got, f) }}
	if err := c.Read(f); err != nil {
		t.Fatal(err)
	}
	fig := func(bench, unit string, v float64, n int64) Figure {
		return Figure{Benchmark: bench, Package: "bj", Value: v, Unit: unit, Iterations: n, Procs: 2, Command: "go test -json -bench .", Time: at, Load: load}
	}
	want := []Figure{
		fig("BenchmarkA/sub-x", "ns/op", 1295850, 212), fig("BenchmarkA/sub-x", "msgs/s", 42.5, 212),
		fig("BenchmarkA/sub-x", "B/op", 5, 212), fig("BenchmarkA/sub-x", "allocs/op", 0, 212),
		fig("BenchmarkSkip", "ns/op", 2001383793, 1), fig("BenchmarkSkip", "B/op", 96, 1), fig("BenchmarkSkip", "allocs/op", 1, 1),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	if !strings.Contains(echo.String(), "b_test.go:5: hello") {
		t.Error("the output was not passed through")
	}
}

func TestResultsAddReplaces(t *testing.T) {
	r := &Results{}
	r.Add(Figure{Benchmark: "B", Unit: "x", Value: 1}, Figure{Benchmark: "B", Unit: "y", Value: 2})
	r.Add(Figure{Benchmark: "B", Unit: "x", Value: 3})
	if diff := cmp.Diff([]Figure{{Benchmark: "B", Unit: "x", Value: 3}, {Benchmark: "B", Unit: "y", Value: 2}}, r.Figures); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, back); diff != "" {
		t.Errorf("read back (-written +read):\n%s", diff)
	}
}

func TestValue(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 1234.6: "1235", 123.45: "123", 12.345: "12.3", 1.2345: "1.23", 0.02812: "0.0281", -4.5: "-4.50"} {
		if got := Value(in); got != want {
			t.Errorf("Value(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestRender(t *testing.T) {
	at := time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)
	r := &Results{}
	for _, sub := range []string{"first-page-100", "phase-Running-page-100", "last-page-100", "upstream-list_all-10000"} {
		r.Add(Figure{Benchmark: "BenchmarkListWith10000Apps/" + sub, Package: "github.com/mlsysops-go/mlsysops/test/integration/northbound", Unit: "p50-ms", Value: 2.04, Iterations: 500, Command: "go test", Time: at, Load: Load{Load1: 4, CPUs: 2}})
		r.Add(Figure{Benchmark: "BenchmarkListWith10000Apps/" + sub, Package: "github.com/mlsysops-go/mlsysops/test/integration/northbound", Unit: "p99-ms", Value: 9.5, Iterations: 500, Command: "go test", Time: at, Load: Load{Load1: 6.25, CPUs: 2}})
	}
	doc := "# API\n\nbefore\n<!-- bench:northbound-list -->\nold table\n<!-- /bench:northbound-list -->\nafter\n"
	got, err := Render(doc, r)
	if err != nil {
		t.Fatal(err)
	}
	want := "# API\n\nbefore\n<!-- bench:northbound-list -->\n" +
		"| request | p50 | p99 | requests |\n| --- | --- | --- | --- |\n" +
		"| first page of 100 | 2.04 ms | 9.50 ms | 500 |\n" +
		"| `phase=Running`, page of 100 | 2.04 ms | 9.50 ms | 500 |\n" +
		"| last page of 100 | 2.04 ms | 9.50 ms | 500 |\n" +
		"| `/apps/list_all/` (10,000) | 2.04 ms | 9.50 ms | 500 |\n" +
		"\nMeasured 2026-11-23 22:00 UTC on 2 CPUs with a load average of up to 6.2 (other work shared the machine), by `go test`; from `bench/results.json` (`make bench`).\n" +
		"<!-- /bench:northbound-list -->\nafter\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rendered (-want +got):\n%s", diff)
	}
	again, err := Render(got, r)
	if err != nil || again != got {
		t.Errorf("rendering twice changed the document (%v)", err)
	}

	// A figure the results lack is a dash, and the table says which.
	partial := &Results{}
	partial.Add(r.Figures[0], r.Figures[1])
	got, err = Render(doc, partial)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| first page of 100 | 2.04 ms | 9.50 ms | 500 |\n",
		"| last page of 100 | — | — | — |\n",
		"\n— not measured: `bench/results.json` has no figure of `BenchmarkListWith10000Apps/phase-Running-page-100` p50-ms, `BenchmarkListWith10000Apps/phase-Running-page-100` p99-ms, ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered from partial results:\n%s\nwant it to contain %q", got, want)
		}
	}
	if got, err := Render("<!-- bench:figures -->\n<!-- /bench:figures -->", &Results{}); err != nil || !strings.Contains(got, "No figures in `bench/results.json` yet") {
		t.Errorf("figures table of no results = %q, %v; want it to say there are none", got, err)
	}

	for name, tc := range map[string]struct{ doc, want string }{
		"unknown table":  {"<!-- bench:nope -->\n<!-- /bench:nope -->", `no table named "nope"`},
		"mismatched end": {"<!-- bench:figures -->\n<!-- /bench:node-agent -->", "section bench:figures ends with /bench:node-agent"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Render(tc.doc, r); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Render error = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// The documentation's figures are the ones in bench/results.json: a
// figure edited by hand, or results not carried into the tables (make
// bench-readme), fail here.
func TestDocsTablesFromResults(t *testing.T) {
	root := filepath.Join("..", "..")
	r, err := ReadResults(filepath.Join(root, "bench", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"README.md", filepath.Join("docs", "api.md")} {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		if !section.Match(b) {
			t.Errorf("%s has no generated table", doc)
		}
		got, err := Render(string(b), r)
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		if diff := cmp.Diff(string(b), got); diff != "" {
			t.Errorf("%s is not as bench/results.json says (run make bench-readme) (-file +generated):\n%s", doc, diff)
		}
	}
}

// The scale profile's tables: a row per size, ordered by clusters then
// nodes, whatever the order of the results; a size lacking a figure says
// so.
func TestScaleTables(t *testing.T) {
	at := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	r := &Results{}
	add := func(bench, unit string, v float64) {
		r.Add(Figure{Benchmark: bench, Unit: unit, Value: v, Iterations: 1, Command: "testbed scale-bench", Time: at, Load: Load{Load1: 20, CPUs: 2}})
	}
	for _, s := range []struct {
		name string
		pss  float64
	}{{"clusters=10,nodes=1000", 9000}, {"clusters=1,nodes=100", 2000}, {"clusters=2,nodes=1000", 3000}} {
		b := "BenchmarkScaleProfile/" + s.name
		add(b, "up-s", 300)
		add(b, "PSS-MiB", s.pss)
		add(b, "RSS-MiB", s.pss+500)
		add(b, "cores", 0.5)
		add(b, "up-CPU-s", 200)
		if s.name != "clusters=2,nodes=1000" {
			add(b, "processes", 23)
		}
		add(b+"/per-member-cluster", "PSS-MiB", 700)
		add(b+"/per-member-cluster", "RSS-MiB", 800)
		add(b+"/per-member-cluster", "cores", 0.1)
		add(b+"/per-member-cluster", "up-CPU-s", 60)
		add(b+"/member=apiserver", "PSS-MiB", 400)
	}
	add("BenchmarkScaleGrowth/per-member-cluster,nodes=1000", "PSS-MiB", 700)
	add("BenchmarkScaleGrowth/per-member-cluster,nodes=1000/member-clusters", "PSS-MiB", 690)
	got, err := Render("<!-- bench:scale-profile -->\n<!-- /bench:scale-profile -->\n<!-- bench:scale-growth -->\n<!-- /bench:scale-growth -->\n", r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| clusters × nodes | up | memory (PSS) | RSS | CPU at rest | CPU to settle | processes | load |\n",
		"| 1 × 100 | 300 s | 2000 MiB | 2500 MiB | 0.500 cores | 200 s | 23.0 | 20.0 on 2 CPUs |\n" +
			"| 2 × 1000 | 300 s | 3000 MiB | 3500 MiB | 0.500 cores | 200 s | — | 20.0 on 2 CPUs |\n" +
			"| 10 × 1000 | 300 s | 9000 MiB | 9500 MiB | 0.500 cores | 200 s | 23.0 | 20.0 on 2 CPUs |\n",
		"| 10 × 1000 | 700 MiB | 800 MiB | 0.100 cores | 60.0 s | 20.0 on 2 CPUs |\n",
		"not measured: `bench/results.json` has no figure of `BenchmarkScaleProfile/clusters=2,nodes=1000` processes",
		"| per-member-cluster,nodes=1000 | 700 MiB | — |",
		"| per-member-cluster,nodes=1000, member clusters alone | 690 MiB | — |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered:\n%s\nwant it to contain %q", got, want)
		}
	}
	if got, err := Render("<!-- bench:scale-profile -->\n<!-- /bench:scale-profile -->", &Results{}); err != nil || !strings.Contains(got, "No figures of `testbed scale-bench`") {
		t.Errorf("scale table of no results = %q, %v", got, err)
	}
}

// Figures measured on different days name both dates.
func TestRenderProvenanceAcrossDays(t *testing.T) {
	r := &Results{}
	pkg := "github.com/mlsysops-go/mlsysops/test/integration/northbound"
	for i, sub := range []string{"first-page-100", "phase-Running-page-100", "last-page-100", "upstream-list_all-10000"} {
		at := time.Date(2026, 11, 24, 0, 35, 0, 0, time.UTC)
		if i == 3 {
			at = time.Date(2026, 11, 28, 10, 28, 0, 0, time.UTC)
		}
		r.Add(Figure{Benchmark: "BenchmarkListWith10000Apps/" + sub, Package: pkg, Unit: "p50-ms", Value: 2, Iterations: 1, Command: "go test", Time: at, Load: Load{Load1: 4, CPUs: 2}})
	}
	got, err := Render("<!-- bench:northbound-list -->\n<!-- /bench:northbound-list -->\n", r)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Measured 2026-11-24 00:35 – 2026-11-28 10:28 UTC"; !strings.Contains(got, want) {
		t.Errorf("rendered %q, want it to contain %q", got, want)
	}
}
