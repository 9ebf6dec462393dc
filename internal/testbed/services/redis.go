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
// that a restart keeps every acknowledged write.
type Redis struct {
	dir      string
	port     int
	password string
	proc     *proc.Process
	// also are addresses it listens on besides 127.0.0.1 (the testbed
	// bridge's, for pods).
	also []string
}

// AlsoListenOn makes the server listen on ip too (set before Start).
func (r *Redis) AlsoListenOn(ip string) { r.also = append(r.also, ip) }

// NewRedis describes a Redis that keeps its data, config, pid and log in dir
// and listens on 127.0.0.1:port.
func NewRedis(dir string, port int, password string) *Redis {
	r := &Redis{dir: dir, port: port, password: password}
	r.proc = &proc.Process{
		Name:    "redis",
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

// Password is the password clients authenticate with.
func (r *Redis) Password() string { return r.password }

// LogFile is where the server logs.
func (r *Redis) LogFile() string { return r.proc.LogFile }

// Start starts the server unless it is already running and healthy.
func (r *Redis) Start(ctx context.Context) error {
	bind := strings.Join(append([]string{"127.0.0.1"}, r.also...), " ")
	conf := fmt.Sprintf(`# Written by the MLSysOps testbed.
bind %s
port %d
protected-mode yes
daemonize no
dir %s
appendonly yes
appendfsync everysec
save ""
requirepass %q
loglevel notice
`, bind, r.port, r.dir, r.password)
	confFile := filepath.Join(r.dir, "redis.conf")
	if old, err := os.ReadFile(confFile); err == nil && string(old) == conf {
		if _, ok := r.proc.Pid(); ok && r.Healthy(ctx) == nil {
			return nil
		}
	}
	_ = r.proc.Stop(5 * time.Second)
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "redis.conf"), []byte(conf), 0o600); err != nil {
		return err
	}
	if err := r.proc.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return r.proc.WaitReady(ctx)
}

// Healthy pings the server with the password.
func (r *Redis) Healthy(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: r.password, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	return c.Ping(ctx).Err()
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
