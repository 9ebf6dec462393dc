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
	files, _ := filepath.Glob(tb.l.path("pids", "*.pid"))
	files = append(files, tb.l.path("redis", "redis.pid"))
	for _, e := range tb.ejabberdNodes(false) {
		files = append(files, e.PIDFile())
	}
	var out []ComponentMemory
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		var total int64
		for _, p := range append([]int{pid}, proc.Descendants(pid)...) {
			total += rss(p)
		}
		if total > 0 {
			out = append(out, ComponentMemory{Name: strings.TrimSuffix(filepath.Base(f), ".pid"), RSSBytes: total})
		}
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
