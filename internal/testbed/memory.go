package testbed

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// ComponentMemory is the resident memory of one component, its child
// processes included (ejabberd's Erlang VM runs under a wrapper).
type ComponentMemory struct {
	Name     string
	RSSBytes int64
}

// Memory reports the resident memory of every running component whose pid
// file is in the state folder.
func (tb *Testbed) Memory() ([]ComponentMemory, error) {
	us, err := tb.Usage()
	if err != nil {
		return nil, err
	}
	out := make([]ComponentMemory, len(us))
	for i, u := range us {
		out[i] = ComponentMemory{Name: u.Name, RSSBytes: u.RSSBytes}
	}
	return out, nil
}

func rss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// ComponentUsage is the resident memory and the CPU time so far of one
// component, its child processes included.
type ComponentUsage struct {
	Name     string
	RSSBytes int64
	// PSSBytes is the proportional share of that memory: a page shared
	// by n processes counts 1/n in each. Ten member apiservers share
	// their binary's pages, postgres's backends its shared buffers: the
	// sum of RSS counts those n times, the sum of PSS once.
	PSSBytes int64
	// CPUSeconds is user and system time since the component started.
	CPUSeconds float64
}

// Usage reports the memory and CPU time of every running component whose
// pid file is in the state folder (agents included).
func (tb *Testbed) Usage() ([]ComponentUsage, error) {
	files, _ := filepath.Glob(tb.l.path("pids", "*.pid"))
	// The services keep their pid files with their data (postgres's
	// children are its backends, one per connection).
	files = append(files, tb.l.path("redis", "redis.pid"), tb.l.path("postgres", "postgres.pid"), tb.l.path("s3", "s3.pid"))
	for _, e := range tb.ejabberdNodes(false) {
		files = append(files, e.PIDFile())
	}
	var out []ComponentUsage
	for _, f := range files {
		if u := PIDFileUsage(f); u.RSSBytes > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

// PIDFileUsage is the usage of the process a pid file names and of its
// descendants; zero when it does not run. The name is the file's, without
// .pid.
func PIDFileUsage(file string) ComponentUsage {
	name := strings.TrimSuffix(filepath.Base(file), ".pid")
	b, err := os.ReadFile(file)
	if err != nil {
		return ComponentUsage{Name: name}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return ComponentUsage{Name: name}
	}
	u := ProcessUsage(pid)
	u.Name = name
	return u
}

// ProcessUsage is the usage of a process and of its descendants.
func ProcessUsage(pid int) ComponentUsage {
	var u ComponentUsage
	for _, p := range append([]int{pid}, proc.Descendants(pid)...) {
		u.RSSBytes += rss(p)
		u.PSSBytes += pss(p)
		u.CPUSeconds += cpuSeconds(p)
	}
	return u
}

// pss is a process's proportional set size (/proc/<pid>/smaps_rollup).
func pss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// cpuSeconds is a process's user and system time (clock ticks of 1/100 s).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis; utime and stime
	// are the 12th and 13th of them.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 > len(b) {
		return 0
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}
