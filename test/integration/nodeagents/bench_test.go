package nodeagents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// agentCounts are the sizes measured: $MLSYSOPS_NODE_AGENTS (comma
// separated) or testbedNodeAgents (the shared testbed's node agents, all
// processes) and 1,000 (a swarm of 999 and one process).
func agentCounts(b *testing.B) []int {
	return testbed.EnvSizes(b, "MLSYSOPS_NODE_AGENTS", testbedNodeAgents, 1000)
}

// testbedNodeAgents is the number of nodes of the shared testbed, each
// with its node agent: a size up to it runs those; a larger one a swarm.
const testbedNodeAgents = 10

// victim is the node agent that runs as a process and is killed.
const victim = "far-edge-rpi-1"

// BenchmarkNodeAgents runs 10 and 1,000 node agents through the shared
// testbed's ejabberd to their two cluster agents and reports: the time
// from starting them all to every one online at its cluster agent (the
// connection storm); after a settling minute, over a minute, telemetry
// reports and heartbeats received per second against what the agents'
// intervals call for, and their transit time p50 and p99 (creation to
// receipt); the round trip of a ping from each cluster agent to all its
// node agents at once (p50, p99); ejabberd's share of a core and resident
// memory; this process's heap and goroutines per swarm agent; and how
// long a cluster agent takes to notice the node agent killed (SIGKILL).
func BenchmarkNodeAgents(b *testing.B) {
	for _, n := range agentCounts(b) {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			if b.N > 1 {
				b.Skip("one run per size (-benchtime 1x)")
			}
			env := testbed.Shared(b)
			opts := testbed.TestAgentsOptions{Args: []string{"--heartbeat-interval", heartbeat.String()}}
			var names []string
			if n > testbedNodeAgents {
				opts.Descriptions, names = swarmDescriptions(b, n-1)
				opts.Only = []string{victim}
			} else {
				opts.Nodes = true
			}
			// The accounts of every agent (the reconciler's first pass)
			// and the continuum and cluster agents.
			provision := time.Now()
			ta := testbed.StartTestAgents(b, env, opts)
			b.ReportMetric(time.Since(provision).Seconds(), "provision-s")
			if got := nodeAgents(ta); len(names) == 0 && got != n {
				b.Fatalf("the shared testbed runs %d node agents; this size wants %d (sizes up to %d run the testbed's)", got, n, testbedNodeAgents)
			}
			heap0, gr0, rss0 := heapInUse(), runtime.NumGoroutine(), selfRSS()
			start := time.Now()
			var sw *swarm
			if len(names) > 0 {
				sw = startSwarm(b, ta, opts.Descriptions, names)
			}
			connect := waitOnline(b, ta, n, 15*time.Minute, sw)
			if len(names) > 0 {
				connect = time.Since(start)
				b.ReportMetric(float64(heapInUse()-heap0)/float64(len(names)), "heap-B/swarm-agent")
				b.ReportMetric(float64(selfRSS()-rss0)/float64(len(names)), "RSS-B/swarm-agent")
				b.ReportMetric(float64(runtime.NumGoroutine()-gr0)/float64(len(names)), "goroutines/swarm-agent")
			}
			b.ReportMetric(connect.Seconds(), "connect-all-s")

			time.Sleep(time.Minute) // the storm's aftermath (descriptions, CRs) settles
			m0 := clusterMetrics(b, ta)
			_, cpu0 := ejabberdUsage(b, env)
			self0, clusters0 := selfCPU(), clusterAgentsCPU(ta)
			t0 := time.Now()
			time.Sleep(time.Minute)
			m1 := clusterMetrics(b, ta)
			rss, cpu1 := ejabberdUsage(b, env)
			window := time.Since(t0).Seconds()
			if len(names) > 0 {
				// This process is the swarm (and the benchmark's polling,
				// a few requests a second): its CPU per agent is an upper
				// bound of one agent's.
				b.ReportMetric(100*(selfCPU()-self0)/window/float64(len(names)), "CPU-%/swarm-agent")
			}
			b.ReportMetric(100*(clusterAgentsCPU(ta)-clusters0)/window, "cluster-agents-CPU-%")
			interval := telemetryInterval(b, ta)
			for _, typ := range []struct {
				name  string
				every time.Duration
			}{{"telemetry_report", interval}, {"heartbeat", heartbeat}} {
				got := (sumOf(m1, "mlsysops_messaging_received_total", `type="`+typ.name+`"`) -
					sumOf(m0, "mlsysops_messaging_received_total", `type="`+typ.name+`"`)) / window
				want := float64(n) / typ.every.Seconds()
				b.ReportMetric(got, typ.name+"/s")
				b.ReportMetric(got/want, typ.name+"-received/expected")
				b.ReportMetric(quantile(m0, m1, typ.name, 0.5)*1000, typ.name+"-p50-ms")
				b.ReportMetric(quantile(m0, m1, typ.name, 0.99)*1000, typ.name+"-p99-ms")
			}
			b.ReportMetric(100*(cpu1-cpu0)/window, "ejabberd-cpu-%")
			b.ReportMetric(float64(rss)/(1<<20), "ejabberd-rss-MiB")
			pings := pingAll(b, ta)
			b.ReportMetric(pct(pings, 0.5), "ping-p50-ms")
			b.ReportMetric(pct(pings, 0.99), "ping-p99-ms")
			detect := detectLoss(b, ta, victim)
			b.ReportMetric(detect.Seconds(), "loss-detected-s")
			fmt.Printf("node agents n=%d: accounts and parents in %.1f s, connected in %.1f s; telemetry %.1f/s (%.0f%% of expected), p50 %.1f ms p99 %.1f ms; heartbeats %.1f/s; ping p50 %.1f ms p99 %.1f ms; ejabberd %.1f%% CPU %.0f MiB; loss noticed in %.2f s\n",
				n, time.Since(provision).Seconds()-time.Since(start).Seconds(), connect.Seconds(),
				(sumOf(m1, "mlsysops_messaging_received_total", `type="telemetry_report"`)-sumOf(m0, "mlsysops_messaging_received_total", `type="telemetry_report"`))/window,
				100*(sumOf(m1, "mlsysops_messaging_received_total", `type="telemetry_report"`)-sumOf(m0, "mlsysops_messaging_received_total", `type="telemetry_report"`))/window/(float64(n)/interval.Seconds()),
				quantile(m0, m1, "telemetry_report", 0.5)*1000, quantile(m0, m1, "telemetry_report", 0.99)*1000,
				(sumOf(m1, "mlsysops_messaging_received_total", `type="heartbeat"`)-sumOf(m0, "mlsysops_messaging_received_total", `type="heartbeat"`))/window,
				pct(pings, 0.5), pct(pings, 0.99), 100*(cpu1-cpu0)/window, float64(rss)/(1<<20), detect.Seconds())
		})
	}
}

// nodeAgents counts the node agents ta started as processes.
func nodeAgents(ta *testbed.TestAgents) int {
	n := 0
	for _, a := range ta.All {
		if a.Layer == testbed.LayerNode {
			n++
		}
	}
	return n
}

// telemetryInterval is the interval the cluster agents set their nodes'
// telemetry to.
func telemetryInterval(b *testing.B, ta *testbed.TestAgents) time.Duration {
	for _, a := range ta.All {
		if a.Layer != testbed.LayerCluster {
			continue
		}
		resp, err := http.Get(a.URL() + "/status")
		if err != nil {
			b.Fatal(err)
		}
		var st struct {
			Sent float64 `json:"sent_interval_seconds"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err == nil && st.Sent > 0 {
			return time.Duration(st.Sent * float64(time.Second))
		}
	}
	b.Fatal("no cluster agent says its nodes' telemetry interval")
	return 0
}

// pingAll has every cluster agent ping all its node agents at once
// (POST /ping) and returns the round trips in milliseconds.
func pingAll(b *testing.B, ta *testbed.TestAgents) []float64 {
	var out []float64
	for _, a := range ta.All {
		if a.Layer != testbed.LayerCluster {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.URL()+"/ping", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		var res []struct {
			JID     string  `json:"jid"`
			Latency float64 `json:"latency_ms"`
			Error   string  `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Error == "" {
				out = append(out, r.Latency)
			}
		}
	}
	return out
}

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[int(p*float64(len(s)-1))]
}

// selfRSS is this process's resident memory.
func selfRSS() int64 {
	return testbed.ProcessUsage(os.Getpid()).RSSBytes
}

// selfCPU is this process's CPU time so far, in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// clusterAgentsCPU is the CPU seconds so far of the cluster agents.
func clusterAgentsCPU(ta *testbed.TestAgents) float64 {
	var s float64
	for _, a := range ta.All {
		if a.Layer == testbed.LayerCluster {
			s += testbed.PIDFileUsage(a.PIDFile).CPUSeconds
		}
	}
	return s
}
