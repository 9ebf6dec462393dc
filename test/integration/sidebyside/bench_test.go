package sidebyside_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// benchSizes are the burst sizes: $MLSYSOPS_SIDE_BY_SIDE_N (comma
// separated) or 50, 200 and 500.
func benchSizes(b *testing.B) []int {
	v := os.Getenv("MLSYSOPS_SIDE_BY_SIDE_N")
	if v == "" {
		return []int{50, 200, 500}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("MLSYSOPS_SIDE_BY_SIDE_N=%q: want sizes like 50,200,500", v)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkSideBySide submits bursts of N applications, N = 50, 200 and
// 500, of three shapes (one component on one cluster, three components
// on one cluster, one component on two clusters), as plain Karmada
// objects and through MLSysOps (MLSysOpsApp objects; and, for the first
// shape, the northbound API), one after the other on the same testbed,
// and reports for each the time until every application is Running, the
// ratio to plain Karmada, applications per second and the p50 and p99 of
// submission to Running.
//
// The testbed is the scale profile's with generated descriptions: two
// clusters of 60 KWOK nodes (room for 6,600 pods each), the real agent
// processes (continuum and cluster agents; no node agents, see the scale
// profile). The agents are stopped while Karmada runs alone.
func BenchmarkSideBySide(b *testing.B) {
	env := testbed.ScaleTestbed(b, testbed.ScaleSize{Clusters: 2, Nodes: 60})
	agents := testbed.StartTestAgents(b, env.Env, testbed.TestAgentsOptions{Descriptions: env.Descriptions, Args: []string{"--child-grace-period", "0"}})
	h := newHarness(b, env.Env)
	agents.WaitCapacityReports(env.Clusters)
	h.cleanup(b)
	for _, n := range benchSizes(b) {
		for i, s := range shapes(env.Clusters) {
			b.Run(fmt.Sprintf("n=%d/%s", n, s.Name), func(b *testing.B) {
				if b.N > 1 {
					b.Skip("one burst per size and shape (-benchtime 1x)")
				}
				paths := []Path{PathRaw, PathCR}
				if i == 0 {
					paths = append(paths, PathAPI)
				}
				results := map[Path]Result{}
				for _, p := range paths {
					if p == PathRaw {
						// Karmada alone: the agents would spend the
						// machine's CPU following its pods.
						agents.StopAll()
					}
					prefix := fmt.Sprintf("b%d-%d-%s", n, i, shortPath(p))
					w0 := h.writes(b)
					results[p] = h.run(b, p, s, n, prefix, time.Duration(n)*3*time.Second+10*time.Minute)
					byKind, total := h.writes(b).since(w0)
					b.ReportMetric(total/float64(n), shortPath(p)+"-api-writes/app")
					fmt.Printf("side-by-side n=%d %s %s: %.1f API writes per application; most: %s\n", n, s.Name, p, total/float64(n), byKind.top(12))
					h.cleanup(b)
					if p == PathRaw {
						agents.StartAll()
						h.placeable(b)
						agents.WaitCapacityReports(env.Clusters)
					}
				}
				raw := results[PathRaw]
				for _, p := range paths {
					r := results[p]
					name := shortPath(p)
					b.ReportMetric(r.Total.Seconds(), name+"-s")
					b.ReportMetric(r.Rate(), name+"-apps/s")
					b.ReportMetric(r.Percentile(0.5).Seconds(), name+"-p50-s")
					b.ReportMetric(r.Percentile(0.99).Seconds(), name+"-p99-s")
					if p != PathRaw {
						b.ReportMetric(r.Total.Seconds()/raw.Total.Seconds(), name+"/raw")
					}
					fmt.Printf("side-by-side n=%d %s %s: %.1f s, %.2f apps/s, p50 %.1f s, p99 %.1f s, %.3f x raw Karmada\n",
						n, s.Name, p, r.Total.Seconds(), r.Rate(), r.Percentile(0.5).Seconds(), r.Percentile(0.99).Seconds(), r.Total.Seconds()/raw.Total.Seconds())
				}
			})
		}
	}
}
