package testbed

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// EnvTestRedisMode selects the Redis deployment of the tests that run
// against any (RedisForTest): single (default), sentinel or cluster. `make
// test-redis-modes` runs them in the two others.
const EnvTestRedisMode = "MLSYSOPS_TEST_REDIS_MODE"

// TestRedisMode is the mode EnvTestRedisMode asks for.
func TestRedisMode(t testing.TB) state.Mode {
	t.Helper()
	switch m := state.Mode(os.Getenv(EnvTestRedisMode)); m {
	case "", state.ModeSingle:
		return state.ModeSingle
	case state.ModeSentinel, state.ModeCluster:
		return m
	default:
		t.Fatalf("%s=%q: want single, sentinel or cluster", EnvTestRedisMode, m)
	}
	return ""
}

// RedisDeployment is a Redis of any mode, private to a test: one server, a
// Sentinel group (a master, one replica, three sentinels) or a Cluster of
// three masters with one replica each.
type RedisDeployment struct {
	Mode     state.Mode
	Single   *services.Redis
	Sentinel *services.RedisSentinel
	Cluster  *services.RedisCluster
}

// RedisForTest starts a Redis deployment of the mode EnvTestRedisMode
// asks for; see StartRedisDeployment.
func RedisForTest(t testing.TB) *RedisDeployment {
	t.Helper()
	return StartRedisDeployment(t, TestRedisMode(t))
}

// StartRedisDeployment starts a Redis deployment of mode, private to the
// test (its own folders and free ports), and stops it when the test ends.
// Failures are detected after services.DefaultFailureDetection.
func StartRedisDeployment(t testing.TB, mode state.Mode) *RedisDeployment {
	t.Helper()
	d := &RedisDeployment{Mode: mode}
	dir, pw := t.TempDir(), services.RandomSecret()
	switch mode {
	case state.ModeSingle:
		d.Single = services.NewRedis(dir, FreePorts(t, 1), pw)
	case state.ModeSentinel:
		d.Sentinel = services.NewRedisSentinel(dir, FreePorts(t, 5), pw, 1, 0)
	case state.ModeCluster:
		d.Cluster = services.NewRedisCluster(dir, FreePorts(t, 12), pw, 3, 1, 0)
	default:
		t.Fatalf("redis mode %q: want single, sentinel or cluster", mode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		_ = d.Kill()
		t.Fatalf("private redis (%s): %v", mode, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range d.processes() {
				t.Logf("--- last lines of %s (%s):\n%s", r.Name(), r.Addr(), proc.Tail(r.LogFile(), 10))
			}
		}
		if err := d.Stop(context.Background()); err != nil {
			_ = d.Kill()
		}
	})
	return d
}

// Config is the client configuration of the deployment.
func (d *RedisDeployment) Config() state.Config {
	switch d.Mode {
	case state.ModeSentinel:
		return state.Config{Mode: d.Mode, Addrs: d.Sentinel.SentinelAddrs(), MasterName: d.Sentinel.MasterName(),
			Password: d.Sentinel.Password(), SentinelPassword: d.Sentinel.Password()}
	case state.ModeCluster:
		return state.Config{Mode: d.Mode, Addrs: d.Cluster.Addrs(), Password: d.Cluster.Password()}
	}
	return state.Config{Mode: state.ModeSingle, Addrs: []string{d.Single.Addr()}, Password: d.Single.Password()}
}

// Start starts every server that does not run and waits until the
// deployment serves (for Sentinel and Cluster: until it is whole again).
func (d *RedisDeployment) Start(ctx context.Context) error {
	switch d.Mode {
	case state.ModeSentinel:
		return d.Sentinel.Start(ctx)
	case state.ModeCluster:
		return d.Cluster.Start(ctx)
	}
	return d.Single.Start(ctx)
}

// Stop stops every server gracefully.
func (d *RedisDeployment) Stop(ctx context.Context) error {
	switch d.Mode {
	case state.ModeSentinel:
		return d.Sentinel.Stop(ctx)
	case state.ModeCluster:
		return d.Cluster.Stop(ctx)
	}
	return d.Single.Stop(ctx)
}

// Kill kills every server with SIGKILL.
func (d *RedisDeployment) Kill() error {
	switch d.Mode {
	case state.ModeSentinel:
		return d.Sentinel.Kill()
	case state.ModeCluster:
		return d.Cluster.Kill()
	}
	return d.Single.Kill()
}

// MasterFor returns the server that holds key as master now.
func (d *RedisDeployment) MasterFor(ctx context.Context, key string) (*services.Redis, error) {
	switch d.Mode {
	case state.ModeSentinel:
		return d.Sentinel.Master(ctx)
	case state.ModeCluster:
		return d.Cluster.MasterFor(ctx, key)
	}
	return d.Single, nil
}

// WaitFailover waits until a server other than old serves key as master,
// and returns it.
func (d *RedisDeployment) WaitFailover(ctx context.Context, key string, old *services.Redis) (*services.Redis, error) {
	if d.Mode == state.ModeSingle {
		return nil, fmt.Errorf("a single Redis has no failover")
	}
	for {
		m, err := d.MasterFor(ctx, key)
		if err == nil && m != old {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no new master for %s (last: %v, %v)", key, m, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitHealthy waits until a Sentinel group or Cluster is whole again
// (every server running has rejoined); a single server until it answers.
func (d *RedisDeployment) WaitHealthy(ctx context.Context) error {
	switch d.Mode {
	case state.ModeSentinel:
		return d.Sentinel.WaitHealthy(ctx)
	case state.ModeCluster:
		return d.Cluster.WaitHealthy(ctx)
	}
	return d.Single.Healthy(ctx)
}

// ReplicasOf returns the running servers that replicate master.
func (d *RedisDeployment) ReplicasOf(ctx context.Context, master *services.Redis) ([]*services.Redis, error) {
	var out []*services.Redis
	for _, s := range d.Servers() {
		if s == master || !s.Running() {
			continue
		}
		f, err := s.Info(ctx, "replication")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Addr(), err)
		}
		if f["role"] == "slave" && f["master_port"] == strconv.Itoa(master.Port()) {
			out = append(out, s)
		}
	}
	return out, nil
}

// processes are the servers and the sentinels.
func (d *RedisDeployment) processes() []*services.Redis {
	if d.Mode == state.ModeSentinel {
		return append(append([]*services.Redis(nil), d.Sentinel.Servers()...), d.Sentinel.Sentinels()...)
	}
	return d.Servers()
}

// Servers are the data servers (not the sentinels).
func (d *RedisDeployment) Servers() []*services.Redis {
	switch d.Mode {
	case state.ModeSentinel:
		return d.Sentinel.Servers()
	case state.ModeCluster:
		return d.Cluster.Nodes()
	}
	return []*services.Redis{d.Single}
}
