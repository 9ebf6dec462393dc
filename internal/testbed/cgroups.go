package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Every real node has a cgroup tree of its own, /mlsysops-<base>/<node>,
// in every hierarchy: the kubelet's cgroupRoot (so two kubelets never
// collect each other's pod cgroups), and <node>/runtime for containerd,
// its shims, the kubelet and kube-proxy. Taking a node down kills
// whatever is in its tree, shims and containers included (they are not
// children of the processes the testbed started), and removes the tree.

// cgroupMounts returns the mount points of the cgroup hierarchies (v1
// hierarchies and the cgroup2 one, if mounted).
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		// ... mountpoint ... - fstype source options
		left, right, ok := strings.Cut(s.Text(), " - ")
		if !ok {
			continue
		}
		lf, rf := strings.Fields(left), strings.Fields(right)
		if len(lf) < 5 || len(rf) < 1 {
			continue
		}
		if rf[0] == "cgroup" || rf[0] == "cgroup2" {
			out = append(out, unescapeMount(lf[4]))
		}
	}
	sort.Strings(out)
	return out, s.Err()
}

// ensureCgroup creates rel (e.g. /mlsysops-16000/cloud-1/runtime) in
// every hierarchy. In the cpuset hierarchy each new level gets its
// parent's CPUs and memory nodes, without which no task may join it.
func ensureCgroup(rel string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	parts := strings.Split(strings.Trim(rel, "/"), "/")
	for _, m := range mounts {
		dir := m
		for _, p := range parts {
			parent := dir
			dir = filepath.Join(dir, p)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("cgroup %s: %w", dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if b, err := os.ReadFile(filepath.Join(parent, f)); err == nil {
					if cur, _ := os.ReadFile(filepath.Join(dir, f)); strings.TrimSpace(string(cur)) == "" {
						if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
							return fmt.Errorf("cgroup %s: %s: %w", dir, f, err)
						}
					}
				}
			}
		}
	}
	return nil
}

// joinCgroup moves pid into rel in every hierarchy.
func joinCgroup(rel string, pid int) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		f := filepath.Join(m, rel, "cgroup.procs")
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move pid %d into %s: %w", pid, f, err)
		}
	}
	return nil
}

// cgroupPids lists the processes in rel's subtree, in every hierarchy.
func cgroupPids(rel string) []int {
	mounts, _ := cgroupMounts()
	seen := map[int]bool{}
	for _, m := range mounts {
		_ = filepath.WalkDir(filepath.Join(m, rel), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}

// killCgroup kills every process in rel's subtree until none is left.
func killCgroup(rel string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := cgroupPids(rel)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: processes %v do not die", rel, pids)
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroup removes rel's subtree, deepest first, in every hierarchy.
// Its processes must be gone.
func removeCgroup(rel string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(m, rel), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			// A cgroup whose last task just exited can be busy a moment.
			var err error
			for i := 0; i < 20; i++ {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, fs.ErrNotExist) {
					err = nil
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// cgroupExists reports whether rel exists in any hierarchy.
func cgroupExists(rel string) bool {
	mounts, _ := cgroupMounts()
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, rel)); err == nil {
			return true
		}
	}
	return false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder lists the mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	dir = filepath.Clean(dir) + "/"
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if strings.HasPrefix(mp+"/", dir) {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unmountUnder detaches every mount below dir.
func unmountUnder(dir string) error {
	var errs []error
	for i := 0; i < 5; i++ {
		mps := mountsUnder(dir)
		if len(mps) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, mp := range mps {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			}
		}
	}
	if mps := mountsUnder(dir); len(mps) > 0 {
		errs = append(errs, fmt.Errorf("still mounted: %s", strings.Join(mps, ", ")))
	}
	return errors.Join(errs...)
}
