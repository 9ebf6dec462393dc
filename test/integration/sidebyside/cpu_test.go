package sidebyside_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// cpuTimes reads the CPU time (user and system, seconds) of every process
// whose command line names dir (the testbed's state folder: its control
// planes, Karmada, etcd, KWOK, Redis, ejabberd and the agents, whose
// descriptions live there), by component. On a shared machine a run's
// wall time follows the load; the CPU its processes used does not, and
// says what each path costs.
func cpuTimes(dir string) map[string]float64 {
	out := map[string]float64{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(raw), dir) {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name, which may hold spaces.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		out[componentName(args, pid)] += (utime + stime) / 100 // USER_HZ
	}
	return out
}

// componentName names a process by its program and what tells its
// instances apart.
func componentName(args []string, pid int) string {
	name := filepath.Base(args[0])
	flag := func(key string) string {
		for i, a := range args {
			if v, ok := strings.CutPrefix(a, key+"="); ok {
				return v
			}
			if a == key && i+1 < len(args) {
				return args[i+1]
			}
		}
		return ""
	}
	switch {
	case name == "kube-apiserver":
		return name + " " + filepath.Base(flag("--etcd-prefix"))
	case strings.HasPrefix(name, "mlsysops-agent"):
		return "agent " + flag("--layer") + " " + flag("--node-name")
	case name == "kube-controller-manager" || name == "kube-scheduler" || name == "kwok":
		return name + " " + strings.SplitN(filepath.Base(flag("--kubeconfig")), "-", 3)[0]
	case strings.HasPrefix(name, "beam"):
		return "ejabberd"
	}
	return name
}

// cpuSince describes the CPU the processes used between two readings:
// the total and the largest.
func cpuSince(now, before map[string]float64, perApp float64) (total float64, top string) {
	type use struct {
		name string
		s    float64
	}
	var uses []use
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			uses = append(uses, use{k, d})
			total += d
		}
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].s > uses[j].s })
	var parts []string
	for i, u := range uses {
		if i == 12 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.3f", u.name, u.s/perApp))
	}
	return total, strings.Join(parts, ", ")
}
