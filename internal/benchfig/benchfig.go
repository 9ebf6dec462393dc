// Package benchfig turns benchmark output into figures a reader can trust:
// each value with its unit, the command that produced it, when, and how
// loaded the machine was at that moment. `make bench` runs every
// benchmark through Run, which writes bench/results.json, and Render
// rewrites the marked tables of the documentation from that file, so a
// figure in the README is one a command produced.
package benchfig

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Figure is one measured value.
type Figure struct {
	// Benchmark is the benchmark's name without the GOMAXPROCS suffix,
	// e.g. "BenchmarkPair/reliable-oneway".
	Benchmark string `json:"benchmark"`
	// Package is the Go package of the benchmark ("" for other commands).
	Package string  `json:"package,omitempty"`
	Value   float64 `json:"value"`
	// Unit is the benchmark's unit, e.g. "msgs/s", "ns/op", "MiB-idle-RSS".
	Unit string `json:"unit"`
	// Iterations is the benchmark's final b.N: how many runs the value
	// is the mean (or, for figures a benchmark computes itself, the
	// result) of.
	Iterations int64 `json:"iterations"`
	// Procs is GOMAXPROCS of the run.
	Procs int `json:"procs"`
	// Command is the command line that produced the figure.
	Command string `json:"command"`
	// Time is when the figure was read from the command's output.
	Time time.Time `json:"time"`
	// Load is the machine's load at that moment.
	Load Load `json:"load"`
}

// Load is the machine's load average (/proc/loadavg) and CPU count: on a
// shared machine a figure means little without it.
type Load struct {
	Load1  float64 `json:"load1"`
	Load5  float64 `json:"load5"`
	Load15 float64 `json:"load15"`
	CPUs   int     `json:"cpus"`
}

// Results is the content of the results file.
type Results struct {
	Figures []Figure `json:"figures"`
}

// Find returns the figure of benchmark in unit.
func (r *Results) Find(benchmark, unit string) (Figure, bool) {
	for _, f := range r.Figures {
		if f.Benchmark == benchmark && f.Unit == unit {
			return f, true
		}
	}
	return Figure{}, false
}

// Add appends figures, replacing those with the same benchmark and unit.
func (r *Results) Add(figs ...Figure) {
	for _, f := range figs {
		replaced := false
		for i := range r.Figures {
			if r.Figures[i].Benchmark == f.Benchmark && r.Figures[i].Unit == f.Unit {
				r.Figures[i], replaced = f, true
			}
		}
		if !replaced {
			r.Figures = append(r.Figures, f)
		}
	}
}

// ReadResults reads a results file.
func ReadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// Write writes the results, sorted by benchmark and unit, to path.
func (r *Results) Write(path string) error {
	sort.SliceStable(r.Figures, func(i, j int) bool {
		a, b := r.Figures[i], r.Figures[j]
		if a.Benchmark != b.Benchmark {
			return a.Benchmark < b.Benchmark
		}
		return a.Unit < b.Unit
	})
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// benchLine is a result line of `go test -bench`: name, iterations, then
// pairs of value and unit.
var benchLine = regexp.MustCompile(`^(Benchmark\S*)\s+(\d+)\s+(.*)$`)

// ParseLine reads one result line of `go test -bench` (or of a command
// printing that format). procs is GOMAXPROCS of the run, whose "-N" suffix
// Go adds to the name when above 1.
func ParseLine(line string, procs int) ([]Figure, bool) {
	m := benchLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return nil, false
	}
	iters, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return nil, false
	}
	name := m[1]
	if procs > 1 {
		name = strings.TrimSuffix(name, "-"+strconv.Itoa(procs))
	}
	fields := strings.Fields(m[3])
	if len(fields) == 0 || len(fields)%2 != 0 {
		return nil, false
	}
	var out []Figure
	for i := 0; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return nil, false
		}
		out = append(out, Figure{Benchmark: name, Value: v, Unit: fields[i+1], Iterations: iters, Procs: procs})
	}
	return out, true
}

// event is the part of a `go test -json` (test2json) event read here.
type event struct {
	Action  string
	Package string
	Output  string
}

// Collector reads a command's output, `go test -json` events or plain
// text, and gives each benchmark figure to Found as it appears, stamped
// with the command, the time and the machine's load. Echo receives the
// output as text for the user.
type Collector struct {
	Command string
	Procs   int
	Found   func(Figure)
	Echo    io.Writer
	// Now and ReadLoad default to the clock and /proc/loadavg.
	Now      func() time.Time
	ReadLoad func() Load

	partial map[string]string // per package, output not ended by a newline yet
}

// Read reads r to its end.
func (c *Collector) Read(r io.Reader) error {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ReadLoad == nil {
		c.ReadLoad = ReadLoad
	}
	if c.Procs == 0 {
		c.Procs = runtime.GOMAXPROCS(0)
	}
	c.partial = map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		var ev event
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &ev) == nil && ev.Action != "" {
			if ev.Action == "output" {
				c.output(ev.Package, ev.Output)
			}
			continue
		}
		c.output("", line+"\n")
	}
	for pkg, rest := range c.partial {
		c.line(pkg, rest)
	}
	return sc.Err()
}

// output joins a package's output into lines: test2json splits a result
// line after the benchmark's name.
func (c *Collector) output(pkg, text string) {
	if c.Echo != nil {
		_, _ = io.WriteString(c.Echo, text)
	}
	text = c.partial[pkg] + text
	for {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			break
		}
		c.line(pkg, text[:i])
		text = text[i+1:]
	}
	c.partial[pkg] = text
}

func (c *Collector) line(pkg, line string) {
	// Only go test adds the GOMAXPROCS suffix; other commands' names (a
	// node "edge-2") are kept whole.
	procs := 0
	if pkg != "" {
		procs = c.Procs
	}
	figs, ok := ParseLine(line, procs)
	if !ok {
		return
	}
	now, load := c.Now().UTC(), c.ReadLoad()
	for _, f := range figs {
		f.Package, f.Command, f.Time, f.Load, f.Procs = pkg, c.Command, now, load, c.Procs
		c.Found(f)
	}
}

// ReadLoad reads /proc/loadavg; zero load when it cannot.
func ReadLoad() Load {
	l := Load{CPUs: runtime.NumCPU()}
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	if len(f) >= 3 {
		l.Load1, _ = strconv.ParseFloat(f[0], 64)
		l.Load5, _ = strconv.ParseFloat(f[1], 64)
		l.Load15, _ = strconv.ParseFloat(f[2], 64)
	}
	return l
}

// Run runs a command, passes its output through to echo, and returns the
// figures it printed; err is the command's failure, if any (the figures
// read until then are returned too).
func Run(ctx context.Context, args []string, echo io.Writer) ([]Figure, error) {
	if len(args) == 0 {
		return nil, errors.New("no command to run")
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stderr = echo
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", args[0], err)
	}
	var figs []Figure
	c := &Collector{Command: strings.Join(args, " "), Echo: echo, Found: func(f Figure) { figs = append(figs, f) }}
	readErr := c.Read(out)
	if err := cmd.Wait(); err != nil {
		return figs, fmt.Errorf("%s: %w", c.Command, err)
	}
	return figs, readErr
}
