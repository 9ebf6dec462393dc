package benchfig

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A marked section of a Markdown file, rewritten by Render:
//
//	<!-- bench:node-agent -->
//	(generated)
//	<!-- /bench:node-agent -->
var section = regexp.MustCompile(`(?s)(<!-- bench:([a-z0-9-]+) -->\n).*?(<!-- /bench:([a-z0-9-]+) -->)`)

// Tables are the sections Render knows, by name.
var Tables = map[string]func(*Results) (string, error){
	"node-agent":      nodeAgentTable,
	"northbound-list": northboundListTable,
	"figures":         func(r *Results) (string, error) { return figuresTable(r, "") },
	// The testbed's own figures (cmd/testbed bench): time to ready,
	// memory, real nodes, images.
	"testbed": func(r *Results) (string, error) {
		return figuresTable(r, "BenchmarkTestbed", "BenchmarkRealNode", "BenchmarkImage")
	},
	// The scale profile (cmd/testbed scale-bench), the 1,000 node agents,
	// the 500-application burst and the continuum's decisions
	// (docs/performance.md).
	"scale-profile": scaleProfileTable,
	"scale-growth":  scaleGrowthTable,
	"node-agents": func(r *Results) (string, error) {
		return figuresTable(r, "BenchmarkNodeAgents/")
	},
	"burst": func(r *Results) (string, error) { return figuresTable(r, "BenchmarkBurst500") },
	"continuum-decisions": func(r *Results) (string, error) {
		return figuresTable(r, "BenchmarkContinuumDecisions")
	},
}

// Render rewrites every marked section of a Markdown document from r.
func Render(doc string, r *Results) (string, error) {
	var errs []error
	out := section.ReplaceAllStringFunc(doc, func(m string) string {
		g := section.FindStringSubmatch(m)
		if g[2] != g[4] {
			errs = append(errs, fmt.Errorf("section bench:%s ends with /bench:%s", g[2], g[4]))
			return m
		}
		table, ok := Tables[g[2]]
		if !ok {
			errs = append(errs, fmt.Errorf("no table named %q", g[2]))
			return m
		}
		body, err := table(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("table %s: %w", g[2], err))
			return m
		}
		return g[1] + body + g[3]
	})
	return out, errors.Join(errs...)
}

// lookup finds figures and collects what is missing.
type lookup struct {
	r       *Results
	missing []string
	seen    []Figure
}

// get returns the figure of benchmark in unit; ok is false when the
// results lack it (its cell then says so, see cell).
func (l *lookup) get(benchmark, unit string) (Figure, bool) {
	f, ok := l.r.Find(benchmark, unit)
	if !ok {
		l.missing = append(l.missing, "`"+benchmark+"` "+unit)
		return f, false
	}
	l.seen = append(l.seen, f)
	return f, true
}

// cell formats the figure of benchmark in unit followed by suffix, or a
// dash when it was not measured.
func (l *lookup) cell(benchmark, unit, suffix string) string {
	f, ok := l.get(benchmark, unit)
	if !ok {
		return "—"
	}
	return Value(f.Value) + suffix
}

// footer says where the table's figures come from and which ones the
// results lack: a table is never filled with figures from elsewhere.
func (l *lookup) footer() string {
	var b strings.Builder
	if len(l.seen) > 0 {
		b.WriteString("\n" + l.provenance() + "\n")
	}
	if len(l.missing) > 0 {
		fmt.Fprintf(&b, "\n— not measured: `bench/results.json` has no figure of %s (run `make bench`).\n", strings.Join(dedupe(l.missing), ", "))
	}
	return b.String()
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// provenance says where the figures of a table come from.
func (l *lookup) provenance() string {
	var first, last time.Time
	maxLoad, cpus := 0.0, 0
	commands := map[string]bool{}
	for _, f := range l.seen {
		if f.Time.IsZero() {
			continue
		}
		if first.IsZero() || f.Time.Before(first) {
			first = f.Time
		}
		if f.Time.After(last) {
			last = f.Time
		}
		maxLoad, cpus = math.Max(maxLoad, f.Load.Load1), f.Load.CPUs
		commands[f.Command] = true
	}
	when := first.Format("2006-01-02 15:04")
	switch {
	case last.Format("2006-01-02") != first.Format("2006-01-02"):
		when += " – " + last.Format("2006-01-02 15:04")
	case last.Sub(first) >= time.Minute:
		when += "–" + last.Format("15:04")
	}
	var cmds []string
	for c := range commands {
		cmds = append(cmds, "`"+c+"`")
	}
	sort.Strings(cmds)
	return fmt.Sprintf("Measured %s UTC on %d CPUs with a load average of up to %s (other work shared the machine), by %s; from `bench/results.json` (`make bench`).",
		when, cpus, strconv.FormatFloat(maxLoad, 'f', 1, 64), strings.Join(cmds, ", "))
}

// Value formats a figure with three significant digits (whole numbers
// from 100 on).
func Value(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	decimals := max(0, 2-int(math.Floor(math.Log10(math.Abs(v)))))
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

func runs(n int64) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}

func nodeAgentTable(r *Results) (string, error) {
	l := &lookup{r: r}
	var b strings.Builder
	b.WriteString("| binary | size | RSS | anonymous | file-backed | PSS | start to registered | idle CPU | runs |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, row := range []struct{ bench, binary, pssNote string }{
		{"BenchmarkNodeAgent/node-only", "mlsysops-agent-node", ""},
		{"BenchmarkNodeAgent/full", "mlsysops-agent", "¹"},
	} {
		c := func(unit, suffix string) string { return l.cell(row.bench, unit, suffix) }
		n := "—"
		if f, ok := l.get(row.bench, "ms-to-registered"); ok {
			n = runs(f.Iterations)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s%s | %s | %s | %s |\n", row.binary,
			c("MiB-binary", " MiB"), c("MiB-idle-RSS", " MiB"), c("MiB-idle-anon", " MiB"),
			c("MiB-idle-file", " MiB"), c("MiB-idle-PSS", " MiB"), row.pssNote,
			c("ms-to-registered", " ms"), c("%CPU-idle", "%"), n)
	}
	return b.String() + l.footer(), nil
}

func northboundListTable(r *Results) (string, error) {
	l := &lookup{r: r}
	var b strings.Builder
	b.WriteString("| request | p50 | p99 | requests |\n| --- | --- | --- | --- |\n")
	for _, row := range []struct{ sub, label string }{
		{"first-page-100", "first page of 100"},
		{"phase-Running-page-100", "`phase=Running`, page of 100"},
		{"last-page-100", "last page of 100"},
		{"upstream-list_all-10000", "`/apps/list_all/` (10,000)"},
	} {
		name := "BenchmarkListWith10000Apps/" + row.sub
		n := "—"
		if f, ok := l.get(name, "p50-ms"); ok {
			n = strconv.FormatInt(f.Iterations, 10)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", row.label, l.cell(name, "p50-ms", " ms"), l.cell(name, "p99-ms", " ms"), n)
	}
	return b.String() + l.footer(), nil
}

// figuresTable lists the figures of the results whose benchmark starts
// with one of prefixes ("" for all), a row per benchmark.
func figuresTable(r *Results, prefixes ...string) (string, error) {
	var figs []Figure
	for _, f := range r.Figures {
		for _, p := range prefixes {
			if strings.HasPrefix(f.Benchmark, p) {
				figs = append(figs, f)
				break
			}
		}
	}
	if len(figs) == 0 {
		return "No figures in `bench/results.json` yet (run `make bench`).\n", nil
	}
	type row struct {
		bench, pkg string
		figs       []Figure
	}
	var rows []*row
	byName := map[string]*row{}
	for _, f := range figs {
		rw, ok := byName[f.Benchmark]
		if !ok {
			rw = &row{bench: f.Benchmark, pkg: strings.TrimPrefix(f.Package, "github.com/mlsysops-go/mlsysops/")}
			byName[f.Benchmark] = rw
			rows = append(rows, rw)
		}
		rw.figs = append(rw.figs, f)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].pkg != rows[j].pkg {
			return rows[i].pkg < rows[j].pkg
		}
		return rows[i].bench < rows[j].bench
	})
	var b strings.Builder
	b.WriteString("| package | benchmark | figures | runs | load |\n| --- | --- | --- | --- | --- |\n")
	for _, rw := range rows {
		var vals []string
		for _, f := range rw.figs {
			vals = append(vals, Value(f.Value)+" "+f.Unit)
		}
		f := rw.figs[0]
		pkg := "`" + rw.pkg + "`"
		if rw.pkg == "" {
			pkg = "`" + f.Command + "`"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %d | %s on %d CPUs |\n", pkg, rw.bench, strings.Join(vals, ", "), f.Iterations,
			strconv.FormatFloat(f.Load.Load1, 'f', 1, 64), f.Load.CPUs)
	}
	l := &lookup{r: r, seen: figs}
	return b.String() + "\n" + l.provenance() + "\n", nil
}

// column is one figure of a row: its unit and what follows the value.
type column struct{ title, unit, suffix string }

// rowsTable is a table with a row per benchmark and a column per unit;
// the load column says the highest load of the row's figures.
func rowsTable(r *Results, first string, rows [][2]string, cols []column) string {
	l := &lookup{r: r}
	var b strings.Builder
	b.WriteString("| " + first)
	for _, c := range cols {
		b.WriteString(" | " + c.title)
	}
	b.WriteString(" | load |\n|" + strings.Repeat(" --- |", len(cols)+2) + "\n")
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s", row[0])
		load, cpus := -1.0, 0
		for _, c := range cols {
			fmt.Fprintf(&b, " | %s", l.cell(row[1], c.unit, c.suffix))
			if f, ok := r.Find(row[1], c.unit); ok && f.Load.Load1 > load {
				load, cpus = f.Load.Load1, f.Load.CPUs
			}
		}
		if load < 0 {
			b.WriteString(" | — |\n")
		} else {
			fmt.Fprintf(&b, " | %s on %d CPUs |\n", strconv.FormatFloat(load, 'f', 1, 64), cpus)
		}
	}
	return b.String() + l.footer()
}

// scaleSizes are the sizes of the scale profile the results have, by
// clusters then nodes: the names of BenchmarkScaleProfile/clusters=C,nodes=N.
func scaleSizes(r *Results) [][2]string {
	type sz struct {
		c, n int
		name string
	}
	seen := map[string]bool{}
	var out []sz
	for _, f := range r.Figures {
		rest, ok := strings.CutPrefix(f.Benchmark, "BenchmarkScaleProfile/")
		if !ok || strings.Contains(rest, "/") || seen[f.Benchmark] {
			continue
		}
		seen[f.Benchmark] = true
		var c, n int
		if _, err := fmt.Sscanf(rest, "clusters=%d,nodes=%d", &c, &n); err == nil {
			out = append(out, sz{c, n, f.Benchmark})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].c != out[j].c {
			return out[i].c < out[j].c
		}
		return out[i].n < out[j].n
	})
	rows := make([][2]string, len(out))
	for i, s := range out {
		rows[i] = [2]string{fmt.Sprintf("%d × %d", s.c, s.n), s.name}
	}
	return rows
}

// scaleProfileTable is the scale profile at each size measured (cmd/testbed
// scale-bench): the whole testbed, then a member cluster on average.
func scaleProfileTable(r *Results) (string, error) {
	sizes := scaleSizes(r)
	if len(sizes) == 0 {
		return "No figures of `testbed scale-bench` in `bench/results.json` yet (run `make bench`).\n", nil
	}
	var b strings.Builder
	b.WriteString(rowsTable(r, "clusters × nodes", sizes, []column{
		{"up", "up-s", " s"}, {"memory (PSS)", "PSS-MiB", " MiB"}, {"RSS", "RSS-MiB", " MiB"},
		{"CPU at rest", "cores", " cores"}, {"CPU to settle", "up-CPU-s", " s"}, {"processes", "processes", ""},
	}))
	members := make([][2]string, len(sizes))
	for i, s := range sizes {
		members[i] = [2]string{s[0], s[1] + "/per-member-cluster"}
	}
	b.WriteString("\nA member cluster (its apiserver, controller manager, scheduler, KWOK and cluster agent), on average:\n\n")
	b.WriteString(rowsTable(r, "clusters × nodes", members, []column{
		{"memory (PSS)", "PSS-MiB", " MiB"}, {"RSS", "RSS-MiB", " MiB"}, {"CPU at rest", "cores", " cores"}, {"CPU to settle", "up-CPU-s", " s"},
	}))
	return b.String(), nil
}

// scaleGrowthTable is how the scale profile grows (cmd/testbed
// scale-bench): per 1,000 nodes of one cluster, per member cluster of
// 1,000 nodes; everything, and the member clusters alone.
func scaleGrowthTable(r *Results) (string, error) {
	var rows [][2]string
	seen := map[string]bool{}
	for _, f := range r.Figures {
		rest, ok := strings.CutPrefix(f.Benchmark, "BenchmarkScaleGrowth/")
		if !ok || seen[f.Benchmark] {
			continue
		}
		seen[f.Benchmark] = true
		label := strings.Replace(rest, "/member-clusters", ", member clusters alone", 1)
		rows = append(rows, [2]string{label, f.Benchmark})
	}
	if len(rows) == 0 {
		return "No growth figures of `testbed scale-bench` in `bench/results.json` yet (run `make bench`).\n", nil
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i][0] < rows[j][0] })
	return rowsTable(r, "growth", rows, []column{
		{"memory (PSS)", "PSS-MiB", " MiB"}, {"RSS", "RSS-MiB", " MiB"}, {"CPU at rest", "cores", " cores"},
		{"CPU to settle", "up-CPU-s", " s"}, {"last step / first (PSS)", "PSS-last/first-step", ""},
		{"last step / first (CPU)", "up-CPU-last/first-step", ""}, {"sizes", "sizes", ""},
	}), nil
}
