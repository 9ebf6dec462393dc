package services

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// Redis is a redis-server with a password and the append-only file on, so
// that a restart keeps every acknowledged write. It is also one server of a
// Redis Cluster or of a Sentinel group, or a sentinel (redisha.go).
type Redis struct {
	dir      string
	port     int
	password string
	// extra are configuration lines after the common ones.
	extra []string
	// keepConf leaves a configuration file that exists alone: Sentinel
	// rewrites the files of the servers it reconfigures and its own, and a
	// restart must start from what it wrote.
	keepConf bool
	// sentinel runs redis-server as a sentinel (--sentinel).
	sentinel bool
	// replicated is a server of a Sentinel group or a Cluster.
	replicated bool
	proc       *proc.Process
	// also are addresses it listens on besides 127.0.0.1 (the testbed
	// bridge's, for pods).
	also []string
	// users are ACL user lines (state.ACLUserLine) besides the default
	// user, which keeps the password.
	users []string
}

// SetACLUsers defines ACL users besides the default user (set before
// Start): lines as state.ACLUserLine writes them, which hold password
// digests only.
func (r *Redis) SetACLUsers(lines []string) { r.users = append([]string(nil), lines...) }

// AlsoListenOn makes the server listen on ip too (set before Start).
func (r *Redis) AlsoListenOn(ip string) { r.also = append(r.also, ip) }

// NewRedis describes a Redis that keeps its data, config, pid and log in dir
// and listens on 127.0.0.1:port.
func NewRedis(dir string, port int, password string) *Redis {
	return newRedis("redis", dir, port, password)
}

func newRedis(name, dir string, port int, password string) *Redis {
	r := &Redis{dir: dir, port: port, password: password}
	r.proc = &proc.Process{
		Name:    name,
		Path:    lookPath("redis-server", "/usr/bin/redis-server"),
		Args:    []string{filepath.Join(dir, "redis.conf")},
		Dir:     dir,
		LogFile: filepath.Join(dir, "redis.log"),
		PIDFile: filepath.Join(dir, "redis.pid"),
		Ready:   r.Healthy,
	}
	return r
}

// Addr is the host:port clients connect to.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// Port is the port it listens on.
func (r *Redis) Port() int { return r.port }

// Name names the server in logs and errors.
func (r *Redis) Name() string { return r.proc.Name }

// Password is the password clients authenticate with.
func (r *Redis) Password() string { return r.password }

// LogFile is where the server logs.
func (r *Redis) LogFile() string { return r.proc.LogFile }

// Start starts the server unless it is already running and healthy.
func (r *Redis) Start(ctx context.Context) error {
	conf := r.conf()
	if _, ok := r.proc.Pid(); ok && r.Healthy(ctx) == nil {
		// Running with this configuration (or with the one Sentinel
		// rewrote, which a restart must keep).
		if old, err := os.ReadFile(filepath.Join(r.dir, "redis.conf")); err == nil && (r.keepConf || string(old) == conf) {
			return nil
		}
	}
	_ = r.proc.Stop(5 * time.Second)
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return err
	}
	if err := r.writeConf(conf); err != nil {
		return err
	}
	if err := r.proc.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return r.proc.WaitReady(ctx)
}

// writeConf writes conf into redis.conf, unless keepConf and it exists.
func (r *Redis) writeConf(conf string) error {
	file := filepath.Join(r.dir, "redis.conf")
	if _, err := os.Stat(file); err == nil && r.keepConf {
		return nil
	}
	return os.WriteFile(file, []byte(conf), 0o600)
}

// conf is the server's configuration.
func (r *Redis) conf() string {
	bind := strings.Join(append([]string{"127.0.0.1"}, r.also...), " ")
	conf := fmt.Sprintf(`# Written by the MLSysOps testbed.
bind %s
port %d
protected-mode yes
daemonize no
dir %s
requirepass %q
loglevel notice
`, bind, r.port, r.dir, r.password)
	if !r.sentinel {
		// A lone server syncs its append-only file before it answers: with
		// everysec, Redis postpones the file write (and answers anyway)
		// while a background fsync is slow, so a SIGKILL can lose writes
		// it acknowledged. The servers of a Sentinel group or a Cluster
		// have a replica that holds every acknowledged submission (see
		// internal/state's replicated writes) and sync once a second.
		fsync := "always"
		if r.replicated {
			fsync = "everysec"
		}
		// Replicas authenticate with their master with the same password.
		conf += fmt.Sprintf("appendonly yes\nappendfsync %s\nsave \"\"\nmasterauth %q\nrepl-diskless-sync-delay 0\n", fsync, r.password)
	}
	for _, l := range r.users {
		conf += l + "\n"
	}
	for _, l := range r.extra {
		conf += l + "\n"
	}
	return conf
}

// Healthy pings the server with the password.
func (r *Redis) Healthy(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: r.password, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	return c.Ping(ctx).Err()
}

// Info returns the fields of one INFO section of the server.
func (r *Redis) Info(ctx context.Context, section string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: r.password, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	return infoFields(s), nil
}

// Stop shuts the server down gracefully (it flushes the AOF).
func (r *Redis) Stop(ctx context.Context) error { return r.proc.Stop(10 * time.Second) }

// Kill kills the server with SIGKILL, as a crash would.
func (r *Redis) Kill() error { return r.proc.Kill() }

// Pid returns the server's process id and whether it is alive.
func (r *Redis) Pid() (int, bool) { return r.proc.Pid() }

// Running reports whether the server process is alive.
func (r *Redis) Running() bool { _, ok := r.proc.Pid(); return ok }

func lookPath(name, fallback string) string {
	if p, err := execLookPath(name); err == nil {
		return p
	}
	return fallback
}
