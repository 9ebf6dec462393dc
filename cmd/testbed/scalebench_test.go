package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/benchfig"
)

func TestParseSizes(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    []size
		wantErr string
	}{
		"list":       {in: "1x100, 10x1000", want: []size{{1, 100}, {10, 1000}}},
		"no x":       {in: "100", wantErr: `size "100": want CLUSTERSxNODES`},
		"zero nodes": {in: "1x0", wantErr: `size "1x0": want CLUSTERSxNODES`},
		"not a size": {in: "1x100,ax2", wantErr: `size "ax2": want CLUSTERSxNODES`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseSizes(c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(size{})); diff != "" {
				t.Errorf("sizes (-want +got):\n%s", diff)
			}
		})
	}
}

// result is a size whose every member cluster runs the five kinds of
// process and whose shared components are etcd and Karmada's apiserver;
// per1000 MiB and CPU seconds per 1,000 nodes in the apiservers.
func result(clusters, nodes int, per1000 float64) scaleResult {
	r := scaleResult{size: size{clusters, nodes}, up: time.Minute, rss: map[string]int64{}, pss: map[string]int64{}, cpu: map[string]float64{}, upCPU: map[string]float64{}}
	r.clusters = make([]string, clusters)
	for i := range r.clusters {
		c := []string{"cloud-01", "edge-02", "far-edge-03"}[i%3]
		r.clusters[i] = c
		for _, k := range []string{c + "-apiserver", c + "-kube-controller-manager", c + "-kube-scheduler", c + "-kwok", "agent-cluster-" + c} {
			r.rss[k], r.pss[k] = 100<<20, 80<<20
			r.cpu[k] = 0.01
			r.upCPU[k] = 10
		}
		r.rss[c+"-apiserver"] += int64(per1000 * float64(nodes) / 1000 * (1 << 20))
		r.pss[c+"-apiserver"] += int64(per1000 * float64(nodes) / 1000 * (1 << 20))
		r.upCPU[c+"-apiserver"] += per1000 * float64(nodes) / 1000
	}
	r.rss["etcd"], r.cpu["etcd"], r.upCPU["etcd"] = 200<<20, 0.1, 30
	r.rss["karmada-apiserver"], r.cpu["karmada-apiserver"], r.upCPU["karmada-apiserver"] = 300<<20, 0.05, 20
	return r
}

// The figures are lines benchfig reads (Go's benchmark format), a member
// cluster's are averages over the clusters, and the growth is the slope.
func TestScaleResultFigures(t *testing.T) {
	var out strings.Builder
	rs := []scaleResult{result(1, 100, 400), result(1, 1000, 400), result(2, 1000, 400), result(3, 1000, 400)}
	for _, r := range rs {
		r.print(&out)
	}
	printGrowth(&out, rs)
	figs := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		fs, ok := benchfig.ParseLine(line, 0)
		if !ok {
			t.Fatalf("benchfig cannot read %q", line)
		}
		for _, f := range fs {
			figs[f.Benchmark+" "+f.Unit] = f.Value
		}
	}
	for key, want := range map[string]float64{
		"BenchmarkScaleProfile/clusters=1,nodes=1000 RSS-MiB":                        500 + 400 + 500,
		"BenchmarkScaleProfile/clusters=1,nodes=1000 processes":                      7,
		"BenchmarkScaleProfile/clusters=3,nodes=1000/per-member-cluster RSS-MiB":     900,
		"BenchmarkScaleProfile/clusters=3,nodes=1000/member=apiserver RSS-MiB":       500,
		"BenchmarkScaleProfile/clusters=3,nodes=1000/member=cluster-agent up-CPU-s":  10,
		"BenchmarkScaleProfile/clusters=3,nodes=1000/shared=etcd RSS-MiB":            200,
		"BenchmarkScaleGrowth/per-1000-nodes,clusters=1 RSS-MiB":                     400,
		"BenchmarkScaleGrowth/per-1000-nodes,clusters=1 up-CPU-s":                    400,
		"BenchmarkScaleGrowth/per-member-cluster,nodes=1000 RSS-MiB":                 900,
		"BenchmarkScaleGrowth/per-member-cluster,nodes=1000/member-clusters RSS-MiB": 900,
		"BenchmarkScaleGrowth/per-member-cluster,nodes=1000 PSS-last/first-step":     1, // linear
		"BenchmarkScaleProfile/clusters=3,nodes=1000/member=kwok PSS-MiB":            80,
		"BenchmarkScaleGrowth/per-1000-nodes,clusters=1 PSS-MiB":                     400,
		"BenchmarkScaleGrowth/per-member-cluster,nodes=1000/member-clusters cores":   0.05,
		"BenchmarkScaleGrowth/per-member-cluster,nodes=1000 sizes":                   3,
	} {
		got, ok := figs[key]
		if !ok {
			t.Errorf("no figure %s", key)
			continue
		}
		if d := got - want; d > 0.01 || d < -0.01 {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
	// Two sizes say nothing of linearity.
	if v, ok := figs["BenchmarkScaleGrowth/per-1000-nodes,clusters=1 PSS-last/first-step"]; ok {
		t.Errorf("a step ratio from two sizes: %v", v)
	}
}
