package agents_test

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkNodeAgent measures a node agent against a running cluster and
// continuum agent: the time from process start to an acknowledged
// registration, then its resident memory and CPU use while idle.
//
// The upstream Python node agent needs about 106 MB RSS, and 2.9 s only to
// import its libraries; the goal here is under 20 MB.
func BenchmarkNodeAgent(b *testing.B) {
	h := startHierarchy(b, continuumName, clusterName)
	b.ResetTimer()
	var startup, rss, cpu float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		node := h.agents[nodeAllowed]
		b.StartTimer()
		t0 := time.Now()
		if err := node.Start(); err != nil {
			b.Fatal(err)
		}
		for {
			st, err := h.status(nodeAllowed)
			if err == nil && st.Registered {
				break
			}
			if time.Since(t0) > time.Minute {
				b.Fatalf("node not registered after a minute: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		startup += time.Since(t0).Seconds()
		b.StopTimer()
		// Idle: registered, reporting telemetry every 2s, no policies.
		time.Sleep(10 * time.Second)
		pid, _ := node.Pid()
		c0 := cpuSeconds(b, pid)
		w0 := time.Now()
		time.Sleep(20 * time.Second)
		cpu += (cpuSeconds(b, pid) - c0) / time.Since(w0).Seconds()
		rss += rssMB(b, pid)
		_ = node.Stop(5 * time.Second)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(startup/n*1000, "ms-to-registered")
	b.ReportMetric(rss/n, "MB-idle-RSS")
	b.ReportMetric(cpu/n*100, "%CPU-idle")
}

func rssMB(b *testing.B, pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

func cpuSeconds(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name in parentheses; utime and stime are
	// the 14th and 15th fields, in clock ticks (100 per second on Linux).
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / 100
}
