package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/gen"
)

// size is clusters × nodes per cluster.
type size struct{ clusters, nodes int }

func parseSizes(v string) ([]size, error) {
	var out []size
	for _, f := range strings.Split(v, ",") {
		c, n, ok := strings.Cut(strings.TrimSpace(f), "x")
		ci, err1 := strconv.Atoi(c)
		ni, err2 := strconv.Atoi(n)
		if !ok || err1 != nil || err2 != nil || ci < 1 || ni < 1 {
			return nil, fmt.Errorf("size %q: want CLUSTERSxNODES, e.g. 10x1000", f)
		}
		out = append(out, size{ci, ni})
	}
	return out, nil
}

// newScaleBenchCommand measures the scale profile at several sizes: the
// time to bring it up, and each component's resident memory and share of
// a core once it has settled, grouped as what every member cluster adds
// (its apiserver, controller manager, scheduler, KWOK and cluster agent)
// and what is shared (etcd, Karmada, the continuum agent, ejabberd,
// Redis, the northbound API).
func newScaleBenchCommand(o *options) *cobra.Command {
	sizes, settle, window := "1x100,1x500,1x1000,2x1000,5x1000,10x1000", time.Minute, time.Minute
	cmd := &cobra.Command{
		Use:   "scale-bench [--sizes 1x100,1x1000,10x1000]",
		Short: "Measure the scale profile's start-up, memory and CPU at several sizes (uses its own state folder; purged before and after each size)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := parseSizes(sizes)
			if err != nil {
				return err
			}
			var results []scaleResult
			for _, s := range list {
				r, err := measureScale(cmd.Context(), o, s, settle, window)
				if err != nil {
					return fmt.Errorf("%dx%d: %w", s.clusters, s.nodes, err)
				}
				r.print(os.Stdout)
				results = append(results, r)
			}
			printGrowth(os.Stdout, results)
			return nil
		},
	}
	cmd.Flags().StringVar(&sizes, "sizes", sizes, "sizes to measure, CLUSTERSxNODES per cluster, comma separated")
	cmd.Flags().DurationVar(&settle, "settle", settle, "wait after start-up before measuring")
	cmd.Flags().DurationVar(&window, "window", window, "how long CPU use is measured")
	return cmd
}

// scaleResult is one size's figures.
type scaleResult struct {
	size
	up time.Duration
	// rss, cpu (share of one core, over the window) and upCPU (CPU
	// seconds from its start to the end of the settling time) of each
	// component.
	rss   map[string]int64
	pss   map[string]int64
	cpu   map[string]float64
	upCPU map[string]float64
	// clusters are the member clusters' names.
	clusters []string
	// load is the machine's load average over the window.
	load float64
}

func measureScale(ctx context.Context, o *options, s size, settle, window time.Duration) (scaleResult, error) {
	r := scaleResult{size: s, rss: map[string]int64{}, pss: map[string]int64{}, cpu: map[string]float64{}, upCPU: map[string]float64{}}
	descs := filepath.Join(o.state+"-descriptions", fmt.Sprintf("%dx%d", s.clusters, s.nodes))
	if _, err := os.Stat(filepath.Join(descs, "clusters")); err != nil {
		if err := gen.Write(descs, gen.Options{Clusters: s.clusters, Nodes: s.nodes, Continuum: "mls-continuum", Seed: 1}); err != nil {
			return r, err
		}
	}
	r.clusters = gen.ClusterNames(gen.Options{Clusters: s.clusters, Nodes: s.nodes})
	// Progress goes to stderr: stdout is the figures, which `make bench`
	// reads.
	tb, err := testbed.New(testbed.Options{Descriptions: descs, StateDir: o.state, PortBase: o.portBase, BinDir: o.binDir,
		Profile: testbed.ProfileScale, Out: os.Stderr})
	if err != nil {
		return r, err
	}
	if err := tb.Down(ctx, true); err != nil {
		return r, err
	}
	defer tb.Down(context.Background(), true)
	fmt.Fprintf(os.Stderr, "scale profile %d clusters x %d nodes: starting\n", s.clusters, s.nodes)
	start := time.Now()
	if _, err := tb.Up(ctx); err != nil {
		return r, err
	}
	r.up = time.Since(start)
	fmt.Fprintf(os.Stderr, "scale profile %d clusters x %d nodes: up in %.0f s; settling %v, then measuring %v\n", s.clusters, s.nodes, r.up.Seconds(), settle, window)
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(settle):
	}
	before, err := tb.Usage()
	if err != nil {
		return r, err
	}
	load0 := readLoad()
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(window):
	}
	after, err := tb.Usage()
	if err != nil {
		return r, err
	}
	r.load = (load0 + readLoad()) / 2
	elapsed := time.Since(t0).Seconds()
	was := map[string]float64{}
	for _, u := range before {
		was[u.Name] = u.CPUSeconds
		r.upCPU[u.Name] = u.CPUSeconds
	}
	for _, u := range after {
		r.rss[u.Name] = u.RSSBytes
		r.pss[u.Name] = u.PSSBytes
		r.cpu[u.Name] = (u.CPUSeconds - was[u.Name]) / elapsed
	}
	return r, nil
}

// readLoad is the machine's load average over the last minute.
func readLoad() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// memberKinds are what every member cluster runs, by the suffix (or, for
// its agent, the prefix) of the component's name.
var memberKinds = []string{"apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "cluster-agent"}

// usage is the memory and CPU of a group of components.
type usage struct {
	rss, pss   int64
	cpu, upCPU float64
	processes  int
}

func (u *usage) add(r scaleResult, name string) {
	u.rss += r.rss[name]
	u.pss += r.pss[name]
	u.cpu += r.cpu[name]
	u.upCPU += r.upCPU[name]
	u.processes++
}

// split sums the components of the member clusters by kind, and lists
// the others by name.
func (r scaleResult) split() (member, shared map[string]*usage) {
	member, shared = map[string]*usage{}, map[string]*usage{}
	for name := range r.rss {
		kind := ""
		for _, c := range r.clusters {
			if rest, ok := strings.CutPrefix(name, c+"-"); ok && slices.Contains(memberKinds, rest) {
				kind = rest
			}
			if name == "agent-cluster-"+c {
				kind = "cluster-agent"
			}
		}
		m, key := member, kind
		if kind == "" {
			m, key = shared, name
		}
		if m[key] == nil {
			m[key] = &usage{}
		}
		m[key].add(r, name)
	}
	return member, shared
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// totals sums every component, and the member clusters' alone.
func (r scaleResult) totals() (all, members usage) {
	member, shared := r.split()
	for _, u := range member {
		members.plus(u)
	}
	all = members
	for _, u := range shared {
		all.plus(u)
	}
	return all, members
}

// plus adds o to u.
func (u *usage) plus(o *usage) {
	u.rss += o.rss
	u.pss += o.pss
	u.cpu += o.cpu
	u.upCPU += o.upCPU
	u.processes += o.processes
}

// name is the benchmark name of a size.
func (r scaleResult) name() string {
	return fmt.Sprintf("BenchmarkScaleProfile/clusters=%d,nodes=%d", r.size.clusters, r.nodes)
}

// print writes the figures in Go's benchmark format (name, 1 run, value
// unit pairs), which `benchfig run` reads into bench/results.json: the
// whole testbed, a member cluster on average (all its processes, then by
// kind) and each shared component.
func (r scaleResult) print(w io.Writer) {
	member, shared := r.split()
	all, members := r.totals()
	c := float64(r.size.clusters)
	fmt.Fprintf(w, "%s \t1\t%.0f up-s\t%.0f PSS-MiB\t%.0f RSS-MiB\t%.3f cores\t%.0f up-CPU-s\t%d processes\t%.1f load\n",
		r.name(), r.up.Seconds(), mib(all.pss), mib(all.rss), all.cpu, all.upCPU, all.processes, r.load)
	fmt.Fprintf(w, "%s/per-member-cluster \t1\t%.0f PSS-MiB\t%.0f RSS-MiB\t%.3f cores\t%.0f up-CPU-s\n",
		r.name(), mib(members.pss)/c, mib(members.rss)/c, members.cpu/c, members.upCPU/c)
	for _, k := range memberKinds {
		if u := member[k]; u != nil {
			fmt.Fprintf(w, "%s/member=%s \t1\t%.0f PSS-MiB\t%.0f RSS-MiB\t%.3f cores\t%.0f up-CPU-s\n", r.name(), k, mib(u.pss)/c, mib(u.rss)/c, u.cpu/c, u.upCPU/c)
		}
	}
	names := make([]string, 0, len(shared))
	for n := range shared {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		u := shared[n]
		fmt.Fprintf(w, "%s/shared=%s \t1\t%.0f PSS-MiB\t%.0f RSS-MiB\t%.3f cores\t%.0f up-CPU-s\n", r.name(), n, mib(u.pss), mib(u.rss), u.cpu, u.upCPU)
	}
}

// slope is the least-squares slope of y over x.
func slope(pts [][2]float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, p := range pts {
		n++
		sx += p[0]
		sy += p[1]
		sxx += p[0] * p[0]
		sxy += p[0] * p[1]
	}
	if n < 2 || n*sxx == sx*sx {
		return 0
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// printGrowth says how memory and CPU grow: per 1,000 nodes from the
// one-cluster sizes, per member cluster from the sizes of the largest
// node count; and, to tell linear from worse, the ratio of the last
// step's growth to the first step's (1 is linear, above 1 grows faster
// than linear). Everything and the member clusters alone.
func printGrowth(w io.Writer, rs []scaleResult) {
	maxNodes := 0
	for _, r := range rs {
		maxNodes = max(maxNodes, r.nodes)
	}
	var byNodes, byClusters []scaleResult
	for _, r := range rs {
		if r.size.clusters == 1 {
			byNodes = append(byNodes, r)
		}
		if r.nodes == maxNodes {
			byClusters = append(byClusters, r)
		}
	}
	growth := func(name string, rs []scaleResult, x func(scaleResult) float64) {
		if len(rs) < 2 {
			return
		}
		sort.Slice(rs, func(i, j int) bool { return x(rs[i]) < x(rs[j]) })
		for _, part := range []struct {
			suffix string
			get    func(scaleResult) usage
		}{
			{"", func(r scaleResult) usage { a, _ := r.totals(); return a }},
			{"/member-clusters", func(r scaleResult) usage { _, m := r.totals(); return m }},
		} {
			var pss, rss, cpu, upCPU [][2]float64
			for _, r := range rs {
				u := part.get(r)
				pss = append(pss, [2]float64{x(r), mib(u.pss)})
				rss = append(rss, [2]float64{x(r), mib(u.rss)})
				cpu = append(cpu, [2]float64{x(r), u.cpu})
				upCPU = append(upCPU, [2]float64{x(r), u.upCPU})
			}
			// The growth per unit of the last step against the first:
			// with three sizes or more, above 1 means faster than linear.
			step := func(pts [][2]float64) float64 {
				n := len(pts)
				first := (pts[1][1] - pts[0][1]) / (pts[1][0] - pts[0][0])
				last := (pts[n-1][1] - pts[n-2][1]) / (pts[n-1][0] - pts[n-2][0])
				if first <= 0 {
					return 0
				}
				return last / first
			}
			steps := ""
			if len(rs) >= 3 {
				steps = fmt.Sprintf("\t%.2f PSS-last/first-step\t%.2f up-CPU-last/first-step", step(pss), step(upCPU))
			}
			fmt.Fprintf(w, "BenchmarkScaleGrowth/%s%s \t1\t%.0f PSS-MiB\t%.0f RSS-MiB\t%.3f cores\t%.0f up-CPU-s%s\t%d sizes\n",
				name, part.suffix, slope(pss), slope(rss), slope(cpu), slope(upCPU), steps, len(rs))
		}
	}
	growth("per-1000-nodes,clusters=1", byNodes, func(r scaleResult) float64 { return float64(r.nodes) / 1000 })
	growth(fmt.Sprintf("per-member-cluster,nodes=%d", maxNodes), byClusters, func(r scaleResult) float64 { return float64(r.size.clusters) })
}
