package sidebyside_test

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/benchfig"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// loadAverage is the machine's load average over 1, 5 and 15 minutes.
func loadAverage() string {
	l := benchfig.ReadLoad()
	return fmt.Sprintf("%.1f %.1f %.1f", l.Load1, l.Load5, l.Load15)
}

// benchSizes are the burst sizes: $MLSYSOPS_SIDE_BY_SIDE_N (comma
// separated) or 50, 200 and 500.
func benchSizes(b *testing.B) []int {
	return testbed.EnvSizes(b, "MLSYSOPS_SIDE_BY_SIDE_N", 50, 200, 500)
}

// benchRounds is how many times each path runs per size and shape:
// $MLSYSOPS_SIDE_BY_SIDE_ROUNDS or 2.
func benchRounds(b *testing.B) int {
	return testbed.EnvSizes(b, "MLSYSOPS_SIDE_BY_SIDE_ROUNDS", 2)[0]
}

// largeShapes says whether the multi-component and multi-cluster shapes
// run at N of 500 and more too ($MLSYSOPS_SIDE_BY_SIDE_SHAPES=all): by
// default only the single-component one, which keeps the benchmark
// within an hour and a half on the 2-core machine.
// benchTop is how many kinds of request each run's line names, the
// largest first ($MLSYSOPS_SIDE_BY_SIDE_TOP, default 12): all of them
// to compare two paths request by request.
func benchTop(b *testing.B) int {
	return testbed.EnvSizes(b, "MLSYSOPS_SIDE_BY_SIDE_TOP", 12)[0]
}

func largeShapes() bool { return os.Getenv("MLSYSOPS_SIDE_BY_SIDE_SHAPES") == "all" }

// BenchmarkSideBySide submits bursts of N applications, N = 50, 200 and
// 500, of three shapes (one component on one cluster, three components
// on one cluster, one component on two clusters), as plain Karmada
// objects and through MLSysOps (MLSysOpsApp objects; and, for the first
// shape, the northbound API), on the same testbed, and reports for each
// path the time until every application is Running, the ratio to plain
// Karmada, applications per second, the p50 and p99 of submission to
// Running, the API writes per application and, per step on the way to
// Running (the tracer's), the p50.
//
// The paths alternate: each runs once per round, in the order raw, CR,
// API in even rounds and API, CR, raw in odd ones, so that a load that
// rises or falls during the run (the machine is shared) weighs on every
// path alike; the times and ratios are over all rounds (the ratio of the
// summed times), with the smallest and largest ratio of a round beside.
//
// With $MLSYSOPS_SIDE_BY_SIDE_BASELINE naming an agent executable (a
// build of an earlier commit: go build -o FILE ./agents), MLSysOpsApps
// also go through agents running it (path mlsysops-cr-baseline), in the
// same rounds: a change's figure before and after, from one run.
//
// The testbed is the scale profile's with generated descriptions: two
// clusters of 60 KWOK nodes (room for 6,600 pods each), the real agent
// processes (continuum and cluster agents; no node agents, see the scale
// profile), built without the race detector (go test -bench runs without
// it). The agents are stopped while Karmada runs alone: a user of plain
// Karmada has none, and they would spend the machine's CPU following its
// pods.
func BenchmarkSideBySide(b *testing.B) {
	env := testbed.ScaleTestbed(b, testbed.ScaleSize{Clusters: 2, Nodes: 60})
	agents := testbed.StartTestAgents(b, env.Env, testbed.TestAgentsOptions{Descriptions: env.Descriptions, Args: benchAgentArgs})
	h := newHarness(b, env.Env)
	h.prof = newProfiler(b, env.Env, agents)
	h.watchAgentQueues(agents)
	agents.WaitCapacityReports(env.Clusters)
	h.cleanup(b)
	// Which agents run: "" none (Karmada alone), "new" this checkout's,
	// "base" the baseline build's.
	running := "new"
	baseline := os.Getenv("MLSYSOPS_SIDE_BY_SIDE_BASELINE")
	setAgents := func(want string) {
		if want == running {
			return
		}
		if running != "" {
			agents.StopAll()
		}
		if want != "" {
			bin := ""
			if want == "base" {
				bin = baseline
			}
			agents.UseBinary(bin)
			agents.StartAll()
			h.placeable(b)
			agents.WaitCapacityReports(env.Clusters)
		}
		running = want
	}
	rounds, top := benchRounds(b), benchTop(b)
	for _, n := range benchSizes(b) {
		for i, s := range shapes(env.Clusters) {
			if i > 0 && n >= 500 && !largeShapes() {
				continue
			}
			b.Run(fmt.Sprintf("n=%d/%s", n, s.Name), func(b *testing.B) {
				if b.N > 1 {
					b.Skip("one burst per size and shape (-benchtime 1x)")
				}
				paths := []Path{PathRaw, PathCR}
				if i == 0 {
					paths = append(paths, PathAPI)
				}
				if baseline != "" {
					paths = append(paths, PathCRBaseline)
				}
				results := map[Path][]Result{}
				writes := map[Path]float64{}
				cpus := map[Path]float64{}
				for r := range rounds {
					order := slices.Clone(paths)
					if r%2 == 1 {
						slices.Reverse(order)
					}
					for _, p := range order {
						switch p {
						case PathRaw:
							setAgents("")
						case PathCRBaseline:
							setAgents("base")
						default:
							setAgents("new")
						}
						prefix := fmt.Sprintf("b%d-%d-%s%d", n, i, shortPath(p), r)
						w0, q0, c0 := h.writes(b), h.queues(), cpuTimes(env.StateDir)
						res := h.run(b, p, s, n, prefix, time.Duration(n)*3*time.Second+10*time.Minute)
						all, _ := h.writes(b).since(w0)
						byKind, total, reads, read, served := all.split()
						queues := h.queues().since(q0)
						cpu, cpuTop := cpuSince(cpuTimes(env.StateDir), c0, float64(n))
						writes[p] += total / float64(n)
						results[p] = append(results[p], res)
						fmt.Printf("side-by-side n=%d %s %s round %d: %.1f s (load %s); %.1f API writes per application (%s); most: %s; %.1f API reads (GET, LIST) per application (%s); most: %s; apiserver seconds serving (most): %s; queues: %s; CPU per application (with idle): %s; objects in Karmada (JSON, mean): %s\n",
							n, s.Name, p, r, res.Total.Seconds(), loadAverage(), total/float64(n), byKind.perServer(n), byKind.top(top), read/float64(n), reads.perServer(n), reads.top(top*2/3), served.seconds(top), queues, cpuTop, h.sizes(b, p, prefix))
						h.cleanup(b)
						// The testbed's CPU while idle (KWOK's heartbeats, the
						// agents' own), with the same agents, after the run: it
						// is taken out of the run's.
						i0 := cpuTimes(env.StateDir)
						time.Sleep(idleSample)
						idle, _ := cpuSince(cpuTimes(env.StateDir), i0, 1)
						cpu -= idle / idleSample.Seconds() * res.Total.Seconds()
						cpus[p] += cpu / float64(n)
						fmt.Printf("side-by-side n=%d %s %s round %d: CPU %.2f s per application beyond idle (%.2f cores idle)\n", n, s.Name, p, r, cpu/float64(n), idle/idleSample.Seconds())
					}
				}
				reportSideBySide(b, n, s, paths, results, writes, cpus)
			})
		}
	}
}

// idleSample is how long the testbed's idle CPU is measured before each
// run.
const idleSample = 10 * time.Second

// benchAgentArgs are the agents' flags in the benchmark: info logs (the
// test agents' default is debug, for failing tests' logs).
var benchAgentArgs = []string{"--child-grace-period", "0", "--log-level", "info"}

// reportSideBySide reports a size and shape's figures over every round.
func reportSideBySide(b *testing.B, n int, s Shape, paths []Path, results map[Path][]Result, writes, cpus map[Path]float64) {
	sum := func(rs []Result) (total time.Duration, lat []time.Duration, steps []testbed.StepTimes) {
		for _, r := range rs {
			total += r.Total
			lat = append(lat, r.Latencies...)
			steps = append(steps, r.Steps...)
		}
		return total, lat, steps
	}
	rawTotal, _, _ := sum(results[PathRaw])
	for _, p := range paths {
		rs := results[p]
		total, lat, steps := sum(rs)
		all := Result{Path: p, N: n * len(rs), Total: total, Latencies: lat}
		name := shortPath(p)
		rounds := float64(len(rs))
		b.ReportMetric(total.Seconds()/rounds, name+"-s")
		b.ReportMetric(all.Rate(), name+"-apps/s")
		b.ReportMetric(all.Percentile(0.5).Seconds(), name+"-p50-s")
		b.ReportMetric(all.Percentile(0.99).Seconds(), name+"-p99-s")
		b.ReportMetric(writes[p]/rounds, name+"-api-writes/app")
		b.ReportMetric(cpus[p]/rounds, name+"-cpu-s/app")
		ratio, lo, hi := total.Seconds()/rawTotal.Seconds(), 0.0, 0.0
		if p != PathRaw {
			var per []float64
			for r := range rs {
				per = append(per, rs[r].Total.Seconds()/results[PathRaw][r].Total.Seconds())
			}
			sort.Float64s(per)
			lo, hi = per[0], per[len(per)-1]
			b.ReportMetric(ratio, name+"/raw")
			b.ReportMetric(lo, name+"/raw-min")
			b.ReportMetric(hi, name+"/raw-max")
		}
		if p == PathCRBaseline {
			cr, _, _ := sum(results[PathCR])
			b.ReportMetric(cr.Seconds()/total.Seconds(), "cr/crbase")
			fmt.Printf("side-by-side n=%d %s: this build's MLSysOpsApps took %.3f x the baseline build's\n", n, s.Name, cr.Seconds()/total.Seconds())
		}
		fmt.Printf("side-by-side n=%d %s %s: %.1f s per run over %d rounds, %.2f apps/s, p50 %.1f s, p99 %.1f s, %.3f x raw Karmada (rounds %.3f to %.3f), %.1f API writes and %.2f CPU s per application; steps (p50, p99 from submission):\n%s",
			n, s.Name, p, total.Seconds()/rounds, len(rs), all.Rate(), all.Percentile(0.5).Seconds(), all.Percentile(0.99).Seconds(), ratio, lo, hi,
			writes[p]/rounds, cpus[p]/rounds, testbed.FormatSteps(testbed.SummariseSteps(steps)))
	}
}
