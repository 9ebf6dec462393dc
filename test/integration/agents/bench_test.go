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
// registration, then its memory and CPU use while idle. It measures the
// node-only binary node agents run (go build -tags nodeagent, static) and,
// for comparison, the binary built with every layer.
//
// Memory is reported as the resident set (RSS) and its two parts: anonymous
// memory (heap, stacks, runtime structures) and file-backed pages (the
// binary's code and read-only data the process touched, shared with other
// processes running the same binary), and as PSS, which divides shared
// pages among the processes that map them.
//
// The upstream Python node agent needs about 106 MB RSS, and 2.9 s only to
// import its libraries; the goal here is under 20 MB RSS.
func BenchmarkNodeAgent(b *testing.B) {
	h := startHierarchy(b, continuumName, clusterName)
	full, nodeOnly := agentBinaries(b)
	node := h.agents[nodeAllowed]
	for _, bin := range []struct{ name, path string }{{"node-only", nodeOnly}, {"full", full}} {
		b.Run(bin.name, func(b *testing.B) {
			node.Process.Path = bin.path
			st, err := os.Stat(bin.path)
			if err != nil {
				b.Fatal(err)
			}
			var startup, cpu float64
			var mem memory
			for i := 0; i < b.N; i++ {
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
				pid, ok := node.Pid()
				if !ok {
					b.Fatalf("node agent %s exited", bin.name)
				}
				c0 := cpuSeconds(b, pid)
				w0 := time.Now()
				time.Sleep(20 * time.Second)
				cpu += (cpuSeconds(b, pid) - c0) / time.Since(w0).Seconds()
				mem.add(readMemory(b, pid))
				if err := node.Stop(5 * time.Second); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(startup/n*1000, "ms-to-registered")
			b.ReportMetric(mem.rss/n, "MiB-idle-RSS")
			b.ReportMetric(mem.anon/n, "MiB-idle-anon")
			b.ReportMetric(mem.file/n, "MiB-idle-file")
			b.ReportMetric(mem.pss/n, "MiB-idle-PSS")
			b.ReportMetric(cpu/n*100, "%CPU-idle")
			b.ReportMetric(float64(st.Size())/(1<<20), "MiB-binary")
		})
	}
}

// memory is a process's resident memory in MiB.
type memory struct {
	rss, anon, file, pss float64
}

func (m *memory) add(o memory) {
	m.rss += o.rss
	m.anon += o.anon
	m.file += o.file
	m.pss += o.pss
}

// readMemory reads VmRSS, RssAnon and RssFile from /proc/<pid>/status and
// Pss from /proc/<pid>/smaps_rollup.
func readMemory(b *testing.B, pid int) memory {
	var m memory
	fields := map[string]*float64{"VmRSS:": &m.rss, "RssAnon:": &m.anon, "RssFile:": &m.file}
	readKB(b, fmt.Sprintf("/proc/%d/status", pid), fields)
	readKB(b, fmt.Sprintf("/proc/%d/smaps_rollup", pid), map[string]*float64{"Pss:": &m.pss})
	return m
}

// readKB sets each field found in file (lines "Name: <n> kB", kibibytes) to n
// in MiB.
func readKB(b *testing.B, file string, fields map[string]*float64) {
	f, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) < 2 {
			continue
		}
		if p, ok := fields[parts[0]]; ok {
			kb, err := strconv.ParseFloat(parts[1], 64)
			if err != nil {
				b.Fatalf("%s: %s", file, sc.Text())
			}
			*p = kb / 1024
			found++
		}
	}
	if found != len(fields) {
		b.Fatalf("%s: found %d of %d fields", file, found, len(fields))
	}
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
