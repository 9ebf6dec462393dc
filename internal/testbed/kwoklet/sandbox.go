package kwoklet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"
)

// Sandbox says how to run one container of a pod as a process of this
// machine, so that it sees what the container would see: its volumes at
// their mount paths, the image's program at the image's path, its user,
// and its node's network. It is a mount namespace, not a container: the
// rest of the file system, the processes and the kernel are the host's.
type Sandbox struct {
	// Dir is the sandbox's own folder (the new root and the overlays'
	// upper layers live there).
	Dir string `json:"dir"`
	// NetNS is the network namespace to join (a /run/netns file); empty
	// keeps the host's.
	NetNS string `json:"netns,omitempty"`
	// Mounts are bound into the sandbox, in order.
	Mounts []Mount `json:"mounts"`
	// UID, GID and Groups run the program; 0 is root.
	UID    int   `json:"uid"`
	GID    int   `json:"gid"`
	Groups []int `json:"groups,omitempty"`
	// WorkDir is the program's working folder (default /).
	WorkDir string `json:"workDir,omitempty"`
	// Argv and Env are the program's.
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

// Mount binds a file or folder of the host (Source) at Target in the
// sandbox.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// SandboxEnv names the file of a Sandbox: a process started with it set
// runs the sandbox (RunSandboxIfAsked) instead of its main.
const SandboxEnv = "MLSYSOPS_KWOKLET_SANDBOX"

// Command returns the command that runs the sandbox: this executable again,
// in a new mount namespace, which sets the sandbox up and executes the
// program in place of itself. The spec is written to <Dir>/sandbox.json.
func (s *Sandbox) Command(self string) (*exec.Cmd, error) {
	if len(s.Argv) == 0 {
		return nil, errors.New("sandbox: no program")
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	spec := filepath.Join(s.Dir, "sandbox.json")
	if err := os.WriteFile(spec, b, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = []string{SandboxEnv + "=" + spec}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true}
	return cmd, nil
}

// RunSandboxIfAsked runs the sandbox this process was started for, if
// any, and never returns then (the program replaces the process, or it
// exits with the setup's error). Call it first in main (and in TestMain).
func RunSandboxIfAsked() {
	spec := os.Getenv(SandboxEnv)
	if spec == "" {
		return
	}
	err := runSandbox(spec)
	fmt.Fprintln(os.Stderr, "kwoklet sandbox:", err)
	os.Exit(127)
}

func runSandbox(specFile string) error {
	b, err := os.ReadFile(specFile)
	if err != nil {
		return err
	}
	var s Sandbox
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", specFile, err)
	}
	// The namespaces apply to the thread that executes the program.
	runtime.LockOSThread()
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	root := filepath.Join(s.Dir, "root")
	if err := s.buildRoot(root); err != nil {
		return err
	}
	for _, m := range sortedMounts(s.Mounts) {
		if err := bindInto(root, m); err != nil {
			return err
		}
	}
	if s.NetNS != "" {
		fd, err := unix.Open(s.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("network namespace %s: %w", s.NetNS, err)
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("join network namespace %s: %w", s.NetNS, err)
		}
		unix.Close(fd)
	}
	if err := unix.Chroot(root); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	wd := s.WorkDir
	if wd == "" {
		wd = "/"
	}
	if err := os.Chdir(wd); err != nil {
		return fmt.Errorf("working folder %s: %w", wd, err)
	}
	if err := unix.Setgroups(s.Groups); err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	if err := unix.Setgid(s.GID); err != nil {
		return fmt.Errorf("gid %d: %w", s.GID, err)
	}
	if err := unix.Setuid(s.UID); err != nil {
		return fmt.Errorf("uid %d: %w", s.UID, err)
	}
	// The container dies with its kwoklet, as a container dies with its
	// node: the parent-death signal is set here, after the change of
	// user that clears it, and survives the exec. Nothing is left behind
	// when the testbed is killed.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	prog := s.Argv[0]
	if !strings.Contains(prog, "/") {
		if prog, err = lookPath(prog, s.Env); err != nil {
			return err
		}
	}
	return unix.Exec(prog, s.Argv, s.Env)
}

// buildRoot makes root a view of the host's /: each top-level folder is
// bound recursively, except those under which a mount target does not
// exist yet: those are overlays with an upper layer in the sandbox's
// folder, so that mount points can be made without touching the host.
func (s *Sandbox) buildRoot(root string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "mode=755"); err != nil {
		return fmt.Errorf("sandbox root: %w", err)
	}
	needsOverlay := map[string]bool{}
	for _, m := range s.Mounts {
		// Through the host's links (/var/run is /run).
		target, err := securejoin.SecureJoin("/", m.Target)
		if err != nil {
			return err
		}
		if _, err := os.Stat(target); err != nil {
			needsOverlay[topLevel(target)] = true
		}
	}
	entries, err := os.ReadDir("/")
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		host := "/" + name
		dst := filepath.Join(root, name)
		fi, err := os.Lstat(host)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
			continue
		case !fi.IsDir():
			continue
		}
		if err := os.Mkdir(dst, fi.Mode().Perm()); err != nil {
			return err
		}
		if needsOverlay[name] {
			upper, work := filepath.Join(s.Dir, "overlay", name, "upper"), filepath.Join(s.Dir, "overlay", name, "work")
			for _, d := range []string{upper, work} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			opts := "lowerdir=" + host + ",upperdir=" + upper + ",workdir=" + work
			if err := unix.Mount("overlay", dst, "overlay", 0, opts); err != nil {
				return fmt.Errorf("overlay of %s: %w", host, err)
			}
			continue
		}
		if err := unix.Mount(host, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", host, err)
		}
	}
	// Targets at the top level that the host lacks (such as /host).
	for name := range needsOverlay {
		dst := filepath.Join(root, name)
		if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
			if err := os.Mkdir(dst, 0o755); err != nil {
				return err
			}
		}
	}
	// The root lives below a folder bound into itself: drop that copy, so
	// that nothing in the sandbox sees its own root again.
	if inner := filepath.Join(root, root); inner != root {
		if _, err := os.Stat(inner); err == nil {
			_ = unix.Unmount(inner, unix.MNT_DETACH)
		}
	}
	return nil
}

func topLevel(p string) string {
	return strings.SplitN(strings.TrimPrefix(filepath.Clean(p), "/"), "/", 2)[0]
}

// bindInto binds m.Source at m.Target under root, making the mount point
// (a folder or an empty file, like the source).
func bindInto(root string, m Mount) error {
	fi, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("mount %s: %w", m.Target, err)
	}
	// Links inside the root resolve inside it (/var/run -> /run).
	dst, err := securejoin.SecureJoin(root, m.Target)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		err = os.MkdirAll(dst, 0o755)
	} else {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("mount point %s: %w", m.Target, err)
	}
	if err := unix.Mount(m.Source, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("mount %s at %s: %w", m.Source, m.Target, err)
	}
	if m.ReadOnly {
		if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", m.Target, err)
		}
	}
	return nil
}

// lookPath finds a program in the PATH of env.
func lookPath(name string, env []string) (string, error) {
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH %s", name, path)
}

// sortedMounts orders mounts so that a parent is bound before what is
// bound inside it.
func sortedMounts(ms []Mount) []Mount {
	out := append([]Mount(nil), ms...)
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(filepath.Clean(out[i].Target), "/") < strings.Count(filepath.Clean(out[j].Target), "/")
	})
	return out
}
