package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// Host state that real nodes change outside their own network namespaces,
// directories and cgroups: the kubelet sets global kernel settings and
// writes to fixed paths. Several testbeds may run real nodes at once on one
// machine, so what was there before the first one is recorded once, in a
// file every testbed shares under a lock, with the list of testbeds using
// it; the last testbed to go down restores it.

// hostStateDir holds the shared record and its lock.
var hostStateDir = "/run/mlsysops"

// kernelSettings are the global (not per network namespace) settings the
// kubelet changes (container_manager_linux.go setupKernelTunables), plus
// the host's forwarding switch, which nothing of ours should change but
// which the bridge CNI plugin would if it ran in the host's namespace.
var kernelSettings = []string{
	"kernel/panic",
	"kernel/panic_on_oops",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward",
}

// sharedPaths are fixed paths the kubelet or CNI write whatever their
// configuration: removed by the last testbed when the first created them.
var sharedPaths = []string{
	"/var/lib/kubelet",    // device-plugins/kubelet.sock and its checkpoint
	"/var/log/containers", // the kubelet's symlinks to container logs
	"/var/lib/cni",        // libcni's result cache
	"/run/containerd",     // shim sockets (s/)
	"/run/netns",          // ip netns: a bind mount of itself
	"/run/xtables.lock",   // iptables' lock
}

// hostRecord is the shared record.
type hostRecord struct {
	// Users are the state directories of the testbeds with real nodes.
	Users []string `json:"users"`
	// Sysctls are the values before the first user came, by /proc/sys path.
	Sysctls map[string]string `json:"sysctls"`
	// Created are the shared paths that did not exist before.
	Created []string `json:"created"`
}

// withHostRecord runs fn on the shared record under its lock and saves it.
func withHostRecord(fn func(r *hostRecord) error) error {
	if err := os.MkdirAll(hostStateDir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(hostStateDir, "host.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	file := filepath.Join(hostStateDir, "host.json")
	r := &hostRecord{}
	if b, err := os.ReadFile(file); err == nil {
		if err := json.Unmarshal(b, r); err != nil {
			return fmt.Errorf("host state %s: %w", file, err)
		}
	}
	if err := fn(r); err != nil {
		return err
	}
	if len(r.Users) == 0 {
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// acquireHostState records the host's settings when no other testbed
// with real nodes runs, and adds state to the users.
func acquireHostState(state string) error {
	return withHostRecord(func(r *hostRecord) error {
		r.Users = liveUsers(r.Users, state)
		if len(r.Users) == 0 {
			r.Sysctls = map[string]string{}
			for _, k := range kernelSettings {
				b, err := os.ReadFile("/proc/sys/" + k)
				if err != nil {
					continue
				}
				r.Sysctls[k] = strings.TrimSpace(string(b))
			}
			r.Created = nil
			for _, p := range sharedPaths {
				if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
					r.Created = append(r.Created, p)
				}
			}
		}
		if !slices.Contains(r.Users, state) {
			r.Users = append(r.Users, state)
		}
		return nil
	})
}

// releaseHostState removes state from the users; the last one restores
// the recorded settings and removes the shared paths it created.
func releaseHostState(state string) error {
	return withHostRecord(func(r *hostRecord) error {
		r.Users = liveUsers(slices.DeleteFunc(r.Users, func(u string) bool { return u == state }), "")
		if len(r.Users) > 0 {
			return nil
		}
		var errs []error
		for k, v := range r.Sysctls {
			if b, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(b)) == v {
				continue
			}
			if err := writeSysctl("/proc/sys/"+k, v); err != nil {
				errs = append(errs, err)
			}
		}
		for _, p := range r.Created {
			if p == "/run/netns" {
				// Others may keep namespaces there: only an empty one goes.
				if entries, err := os.ReadDir(p); err != nil || len(entries) > 0 {
					continue
				}
				_ = syscall.Unmount(p, syscall.MNT_DETACH)
			}
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// liveUsers keeps the users whose testbed still runs a kubelet (a testbed
// killed and never taken down must not keep the settings forever), and
// keep, which is about to run one.
func liveUsers(users []string, keep string) []string {
	var out []string
	for _, u := range users {
		if u == keep || stateRunsKubelet(u) {
			out = append(out, u)
		}
	}
	return out
}

func stateRunsKubelet(state string) bool {
	files, _ := filepath.Glob(filepath.Join(state, "pids", "*-kubelet.pid"))
	more, _ := filepath.Glob(filepath.Join(state, "pids", "*-containerd.pid"))
	files = append(files, more...)
	for _, f := range files {
		if proc.PIDFileAlive(f) {
			return true
		}
	}
	return false
}
