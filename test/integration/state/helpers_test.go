// Package state_test runs the state library against a real Redis
// (Debian's redis-server, started privately per test by the testbed): one
// server, a Sentinel group or a Cluster, as $MLSYSOPS_TEST_REDIS_MODE says
// (`make test` runs the package in all three).
package state_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

type env struct {
	redis *testbed.RedisDeployment
	rdb   redis.UniversalClient
	store *state.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return envOn(t, testbed.RedisForTest(t))
}

// envOn is an env on the Redis deployment r.
func envOn(t *testing.T, r *testbed.RedisDeployment) *env {
	t.Helper()
	t.Logf("redis: %s", r.Mode)
	rdb, err := state.NewClient(r.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return &env{redis: r, rdb: rdb, store: state.New(rdb, state.Options{Logger: log})}
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func appSpec(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"name":"app-%03d","components":[{"metadata":{"name":"infer"}}]}`, i))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitHealthy polls until Redis answers through the store's client again.
func waitHealthy(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for e.rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("redis did not come back")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scanKeys lists the keys matching pattern on every master: a Redis
// Cluster client's SCAN asks one node only, which holds a third of the
// slots.
func scanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	var (
		mu   sync.Mutex
		keys []string
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 100).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
		return keys, err
	}
	return keys, scan(ctx, rdb)
}
