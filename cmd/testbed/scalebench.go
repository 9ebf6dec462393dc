package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	// rss and cpu (share of one core) of each component.
	rss map[string]int64
	cpu map[string]float64
	// member are the components that every member cluster adds, by kind.
	clusters []string
}

func measureScale(ctx context.Context, o *options, s size, settle, window time.Duration) (scaleResult, error) {
	r := scaleResult{size: s, rss: map[string]int64{}, cpu: map[string]float64{}}
	descs := filepath.Join(o.state+"-descriptions", fmt.Sprintf("%dx%d", s.clusters, s.nodes))
	if _, err := os.Stat(filepath.Join(descs, "clusters")); err != nil {
		if err := gen.Write(descs, gen.Options{Clusters: s.clusters, Nodes: s.nodes, Continuum: "mls-continuum", Seed: 1}); err != nil {
			return r, err
		}
	}
	r.clusters = gen.ClusterNames(gen.Options{Clusters: s.clusters, Nodes: s.nodes})
	tb, err := testbed.New(testbed.Options{Descriptions: descs, StateDir: o.state, PortBase: o.portBase, BinDir: o.binDir,
		Profile: testbed.ProfileScale, Out: io.Discard})
	if err != nil {
		return r, err
	}
	if err := tb.Down(ctx, true); err != nil {
		return r, err
	}
	defer tb.Down(context.Background(), true)
	fmt.Printf("scale profile %d clusters x %d nodes: starting\n", s.clusters, s.nodes)
	start := time.Now()
	if _, err := tb.Up(ctx); err != nil {
		return r, err
	}
	r.up = time.Since(start)
	time.Sleep(settle)
	before, err := tb.Usage()
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	time.Sleep(window)
	after, err := tb.Usage()
	if err != nil {
		return r, err
	}
	elapsed := time.Since(t0).Seconds()
	was := map[string]float64{}
	for _, u := range before {
		was[u.Name] = u.CPUSeconds
	}
	for _, u := range after {
		r.rss[u.Name] = u.RSSBytes
		r.cpu[u.Name] = (u.CPUSeconds - was[u.Name]) / elapsed
	}
	return r, nil
}

// memberKinds are what every member cluster runs, by the suffix (or, for
// its agent, the prefix) of the component's name.
var memberKinds = []string{"apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "cluster-agent"}

// split sums the components of the member clusters by kind, and the
// others by name.
func (r scaleResult) split() (member map[string]int64, memberCPU map[string]float64, shared map[string]int64, sharedCPU map[string]float64) {
	member, memberCPU = map[string]int64{}, map[string]float64{}
	shared, sharedCPU = map[string]int64{}, map[string]float64{}
	for name, rss := range r.rss {
		kind := ""
		for _, c := range r.clusters {
			if rest, ok := strings.CutPrefix(name, c+"-"); ok {
				kind = rest
			}
			if name == "agent-cluster-"+c {
				kind = "cluster-agent"
			}
		}
		if kind == "" {
			shared[name] += rss
			sharedCPU[name] += r.cpu[name]
			continue
		}
		member[kind] += rss
		memberCPU[kind] += r.cpu[name]
	}
	return member, memberCPU, shared, sharedCPU
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func (r scaleResult) totals() (rss int64, cpu float64) {
	for n, b := range r.rss {
		rss += b
		cpu += r.cpu[n]
	}
	return rss, cpu
}

func (r scaleResult) print(w io.Writer) {
	member, memberCPU, shared, sharedCPU := r.split()
	rss, cpu := r.totals()
	fmt.Fprintf(w, "BenchmarkScaleProfile clusters=%d nodes_per_cluster=%d nodes=%d up_s=%.0f total_rss_mib=%.0f total_cpu_cores=%.3f\n",
		r.size.clusters, r.nodes, r.size.clusters*r.nodes, r.up.Seconds(), mib(rss), cpu)
	var parts []string
	for _, k := range memberKinds {
		parts = append(parts, fmt.Sprintf("%s=%.0fMiB/%.3fcores", k, mib(member[k])/float64(r.size.clusters), memberCPU[k]/float64(r.size.clusters)))
	}
	fmt.Fprintf(w, "  per member cluster: %s\n", strings.Join(parts, " "))
	names := make([]string, 0, len(shared))
	for n := range shared {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return shared[names[i]] > shared[names[j]] })
	parts = parts[:0]
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%.0fMiB/%.3fcores", n, mib(shared[n]), sharedCPU[n]))
	}
	fmt.Fprintf(w, "  shared: %s\n", strings.Join(parts, " "))
}

// printGrowth fits how memory and CPU grow: per 1,000 nodes from the
// one-cluster sizes, per cluster from the sizes of the largest node
// count.
func printGrowth(w io.Writer, rs []scaleResult) {
	slope := func(pts [][2]float64) float64 {
		// Least squares.
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
	var byNodes, byNodesCPU, byClusters, byClustersCPU [][2]float64
	maxNodes := 0
	for _, r := range rs {
		maxNodes = max(maxNodes, r.nodes)
	}
	for _, r := range rs {
		rss, cpu := r.totals()
		if r.size.clusters == 1 {
			byNodes = append(byNodes, [2]float64{float64(r.nodes) / 1000, mib(rss)})
			byNodesCPU = append(byNodesCPU, [2]float64{float64(r.nodes) / 1000, cpu})
		}
		if r.nodes == maxNodes {
			byClusters = append(byClusters, [2]float64{float64(r.size.clusters), mib(rss)})
			byClustersCPU = append(byClustersCPU, [2]float64{float64(r.size.clusters), cpu})
		}
	}
	if len(byNodes) > 1 {
		fmt.Fprintf(w, "BenchmarkScaleGrowth per_1000_nodes_one_cluster rss_mib=%.0f cpu_cores=%.3f (least squares over %d sizes)\n",
			slope(byNodes), slope(byNodesCPU), len(byNodes))
	}
	if len(byClusters) > 1 {
		fmt.Fprintf(w, "BenchmarkScaleGrowth per_cluster_of_%d_nodes rss_mib=%.0f cpu_cores=%.3f (least squares over %d sizes)\n",
			maxNodes, slope(byClusters), slope(byClustersCPU), len(byClusters))
	}
}
