// Package proc runs testbed components as detached processes with pid and
// log files, so that any later command can find, check and stop them.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is one detached component of the testbed. Its pid file and log
// file live under the state directory, so any later invocation can find,
// check and stop it.
type Process struct {
	// Name identifies the component in progress output, status and errors.
	Name string
	// Path is the executable; Args its arguments.
	Path string
	Args []string
	// Env is added to the environment of the testbed process.
	Env []string
	// Dir is the working directory.
	Dir string
	// LogFile receives stdout and stderr; PIDFile the process id.
	LogFile string
	PIDFile string
	// Ready reports whether the component serves; it is polled after start.
	Ready func(ctx context.Context) error
	// User, when set and the testbed runs as root, is the account the
	// process runs as (servers such as PostgreSQL refuse to run as root).
	User string
	// OpenFiles, when above 0, is the process's limit of open files (soft
	// and hard), set before it runs: servers that hold a connection per
	// client need more than the usual 1024.
	OpenFiles uint64
	// NetNS, when set, is the network namespace file (/run/netns/NAME) the
	// process runs in; it keeps the testbed's mount namespace.
	NetNS string
	// Started, when set, runs with the new process's pid right after the
	// start, before Start returns (to move it into a cgroup).
	Started func(pid int) error
}

// Pid returns the pid recorded for the process when that process is still
// alive and still runs the same executable (pids get reused).
func (p *Process) Pid() (int, bool) {
	b, err := os.ReadFile(p.PIDFile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, processRuns(pid, p.Path)
}

// Alive reports whether the recorded process is alive, without checking
// its command line: right after a start (and under load) the kernel may
// not show the new program's arguments yet, so start-up waits use this.
func (p *Process) Alive() bool { return p.alive() }

func (p *Process) alive() bool {
	b, err := os.ReadFile(p.PIDFile)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && pid > 0 && processRuns(pid, "")
}

// processRuns tells whether pid is a live (not zombie) process running exe.
func processRuns(pid int, exe string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		return false
	}
	if exe == "" {
		return true
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	if len(cmdline) == 0 {
		// An exec under way (the wrappers of Start exec one another):
		// only kernel threads show no command line for longer.
		return true
	}
	// Scripts show their interpreter first and themselves second.
	args := bytes.Split(cmdline, []byte{0})
	for _, a := range args[:min(2, len(args))] {
		// Some servers (Redis) rewrite their title to "name addr".
		name, _, _ := strings.Cut(filepath.Base(string(a)), " ")
		if name == filepath.Base(exe) {
			return true
		}
	}
	// Right after a start, the process may still be one of the wrappers
	// that set its limits and user (see Start) and exec it.
	if w := filepath.Base(string(args[0])); w == "prlimit" || w == "setpriv" {
		for _, a := range args[1:] {
			if string(a) == exe {
				return true
			}
		}
	}
	return false
}

// Start launches the process in its own session, so that it outlives the
// command that started it, and records its pid.
func (p *Process) Start() error {
	if err := os.MkdirAll(filepath.Dir(p.LogFile), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.PIDFile), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(p.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: open log: %w", p.Name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n==== %s start %s\n", time.Now().Format(time.RFC3339), p.Name)
	path, args := p.Path, p.Args
	asUser := p.User != "" && os.Geteuid() == 0
	if p.OpenFiles > 0 {
		// Go cannot set a child's limits, so util-linux's prlimit does,
		// before setpriv (not su, whose PAM session would reset them)
		// drops to the user; each execs the next, keeping the pid.
		wrap := []string{fmt.Sprintf("--nofile=%d:%d", p.OpenFiles, p.OpenFiles), "--"}
		if asUser {
			wrap = append(wrap, lookPath("setpriv"), "--reuid="+p.User, "--regid="+p.User, "--init-groups", "--")
			asUser = false
		}
		path, args = lookPath("prlimit"), append(append(wrap, p.Path), p.Args...)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if asUser {
		cred, err := Credential(p.User)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		cmd.SysProcAttr.Credential = cred
	}
	if err := startIn(cmd, p.NetNS); err != nil {
		return fmt.Errorf("%s: start %s: %w", p.Name, p.Path, err)
	}
	if p.Started != nil {
		if err := p.Started(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			return fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	if err := os.WriteFile(p.PIDFile+".cmdline", []byte(p.commandLine()), 0o644); err != nil {
		return err
	}
	// Reap the child if it exits while we are still running, so that a
	// crashed component is not mistaken for a live zombie.
	go func() { _ = cmd.Wait() }()
	return os.WriteFile(p.PIDFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// Credential returns the uid and gid of the named account, for running a
// command as that user.
func Credential(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("user %s: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %s: uid %q or gid %q is not numeric", name, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// startIn starts cmd in the network namespace netns (a file such as
// /run/netns/NAME), or in the caller's when netns is empty. The child is
// forked from a thread that joined the namespace; that thread is never
// given back to the Go scheduler (the goroutine ends locked, so the
// runtime ends the thread).
func startIn(cmd *exec.Cmd, netns string) error {
	if netns == "" {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(netns)
		if err != nil {
			errc <- fmt.Errorf("network namespace: %w", err)
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("join network namespace %s: %w", netns, err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

func (p *Process) commandLine() string {
	line := []string{p.Path}
	if p.NetNS != "" {
		line = append(line, "netns="+p.NetNS)
	}
	line = append(append(line, p.Args...), p.Env...)
	if p.OpenFiles > 0 {
		line = append(line, "nofile="+strconv.FormatUint(p.OpenFiles, 10))
	}
	return strings.Join(line, "\x00")
}

// lookPath finds a program on PATH, or where Debian installs it.
func lookPath(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return "/usr/bin/" + name
}

// SameCommand reports whether the running process was started with the
// command line, arguments and environment p has now; a component whose
// configuration changed must be restarted.
func (p *Process) SameCommand() bool {
	b, err := os.ReadFile(p.PIDFile + ".cmdline")
	return err == nil && string(b) == p.commandLine()
}

// WaitReady polls Ready until it succeeds, the process dies or ctx ends. The
// error names the component and its log file.
func (p *Process) WaitReady(ctx context.Context) error {
	var last error
	for {
		// Only liveness here: right after a start, /proc/<pid>/cmdline can
		// still be empty while the kernel finishes the exec.
		if !p.alive() {
			return fmt.Errorf("%s exited during start-up; see %s:\n%s", p.Name, p.LogFile, Tail(p.LogFile, 15))
		}
		if p.Ready == nil {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		last = p.Ready(cctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (%v); see %s:\n%s", p.Name, last, p.LogFile, Tail(p.LogFile, 15))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Stop terminates the process group: SIGTERM, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) error {
	pid, ok := p.Pid()
	if !ok {
		p.removeFiles()
		return nil
	}
	tree := Descendants(pid)
	signalAll(pid, tree, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !anyRuns(pid, tree) {
			p.removeFiles()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	signalAll(pid, tree, syscall.SIGKILL)
	for i := 0; i < 50 && anyRuns(pid, tree); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if anyRuns(pid, tree) {
		return fmt.Errorf("%s (pid %d) does not die", p.Name, pid)
	}
	p.removeFiles()
	return nil
}

func (p *Process) removeFiles() {
	_ = os.Remove(p.PIDFile)
	_ = os.Remove(p.PIDFile + ".cmdline")
}

// Kill sends SIGKILL to the process group at once, as a crash would.
func (p *Process) Kill() error { return p.Signal(syscall.SIGKILL) }

// Signal sends sig to the process, its group and its descendants:
// SIGKILL as a crash would, SIGSTOP and SIGCONT to pause and resume the
// whole component.
func (p *Process) Signal(sig syscall.Signal) error {
	pid, ok := p.Pid()
	if !ok {
		return errors.New(p.Name + " is not running")
	}
	SignalTree(pid, sig)
	return nil
}

// SignalTree sends sig to pid, its process group and every descendant.
func SignalTree(pid int, sig syscall.Signal) { signalAll(pid, Descendants(pid), sig) }

// signalAll signals the process group of pid and every process in tree:
// some children (su, daemons) start sessions of their own and would
// escape a signal to the group alone.
func signalAll(pid int, tree []int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
	for _, c := range tree {
		_ = syscall.Kill(c, sig)
	}
}

func anyRuns(pid int, tree []int) bool {
	if processRuns(pid, "") {
		return true
	}
	for _, c := range tree {
		if processRuns(c, "") {
			return true
		}
	}
	return false
}

// Descendants lists every live descendant of pid, read from /proc.
func Descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], c)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// Tail returns the last n lines of a file, for error messages.
func Tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	// Only what the last start wrote.
	if i := strings.LastIndex(string(b), "\n==== "); i >= 0 {
		b = b[i+1:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// PIDAlive reports whether pid is a live process (a zombie is not).
func PIDAlive(pid int) bool { return processRuns(pid, "") }

// PIDFileAlive reports whether the pid file names a live process.
func PIDFileAlive(file string) bool {
	return (&Process{PIDFile: file}).alive()
}
