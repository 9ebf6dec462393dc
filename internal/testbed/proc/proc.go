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
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	// Scripts show their interpreter first and themselves second.
	args := bytes.SplitN(cmdline, []byte{0}, 3)
	for _, a := range args[:min(2, len(args))] {
		// Some servers (Redis) rewrite their title to "name addr".
		name, _, _ := strings.Cut(filepath.Base(string(a)), " ")
		if name == filepath.Base(exe) {
			return true
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
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start %s: %w", p.Name, p.Path, err)
	}
	// Reap the child if it exits while we are still running, so that a
	// crashed component is not mistaken for a live zombie.
	go func() { _ = cmd.Wait() }()
	return os.WriteFile(p.PIDFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// WaitReady polls Ready until it succeeds, the process dies or ctx ends. The
// error names the component and its log file.
func (p *Process) WaitReady(ctx context.Context) error {
	var last error
	for {
		if _, ok := p.Pid(); !ok {
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
		_ = os.Remove(p.PIDFile)
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !processRuns(pid, "") {
			_ = os.Remove(p.PIDFile)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for i := 0; i < 50 && processRuns(pid, ""); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if processRuns(pid, "") {
		return fmt.Errorf("%s (pid %d) does not die", p.Name, pid)
	}
	_ = os.Remove(p.PIDFile)
	return nil
}

// Kill sends SIGKILL to the process group at once, as a crash would.
func (p *Process) Kill() error {
	pid, ok := p.Pid()
	if !ok {
		return errors.New(p.Name + " is not running")
	}
	return syscall.Kill(-pid, syscall.SIGKILL)
}

// Tail returns the last n lines of a file, for error messages.
func Tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
