package state_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/state"
)

func TestAgentRegistry(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	reg := e.store.Agents()

	if err := reg.SetLiveness(ctx, "stray@mlsysops.local", true, time.Now()); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("liveness of an unregistered agent: %v, want ErrNotFound", err)
	}
	seen := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	a := state.Agent{JID: "node-1@mlsysops.local", Layer: "node", Cluster: "cluster-1", Node: "node-1", Version: "v1", LastSeen: seen, Online: true}
	if err := reg.Register(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(ctx, state.Agent{JID: "cluster-1@mlsysops.local", Layer: "cluster", Cluster: "cluster-1", Online: true}); err != nil {
		t.Fatal(err)
	}
	got, err := reg.Get(ctx, a.JID)
	if err != nil {
		t.Fatal(err)
	}
	first := got.RegisteredAt
	if first.IsZero() {
		t.Error("RegisteredAt not set")
	}
	got.RegisteredAt = time.Time{}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("registered agent (-want +got):\n%s", diff)
	}

	later := seen.Add(time.Minute)
	if err := reg.SetLiveness(ctx, a.JID, false, later); err != nil {
		t.Fatal(err)
	}
	a.Version = "v2"
	a.Online = false
	a.LastSeen = later
	if err := reg.Register(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, _ = reg.Get(ctx, a.JID)
	if got.Online || !got.LastSeen.Equal(later) || got.Version != "v2" || !got.RegisteredAt.Equal(first) {
		t.Errorf("after liveness and re-registration: %+v (registered first at %v)", got, first)
	}
	list, err := reg.List(ctx)
	if err != nil || len(list) != 2 || list[0].JID != "cluster-1@mlsysops.local" {
		t.Errorf("List = %+v, %v", list, err)
	}
	if err := reg.Remove(ctx, a.JID); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Get(ctx, a.JID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get after Remove: %v", err)
	}
}

// TestTelemetryExpires: a sample is there until its TTL, then gone. The
// TTL is Redis's: the test reads it from the server rather than racing a
// short one, and watches a sample put with a TTL of 1 ms disappear.
func TestTelemetryExpires(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tel := e.store.Telemetry()
	s := state.Sample{Node: "node-1", Time: time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC), Metrics: map[string]float64{"cpu": 0.5}}
	if err := tel.Put(ctx, s, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := tel.Put(ctx, state.Sample{Node: "node-2", Metrics: map[string]float64{"cpu": 0.1}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := tel.Get(ctx, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("sample (-put +got):\n%s", diff)
	}
	many, err := tel.GetMany(ctx, "node-1", "node-2", "node-3")
	if err != nil || len(many) != 2 {
		t.Errorf("GetMany = %v, %v; want node-1 and node-2", many, err)
	}
	// The key carries the TTL it was put with.
	keys, err := scanKeys(ctx, e.rdb, "*telemetry*node-1*")
	if err != nil || len(keys) != 1 {
		t.Fatalf("telemetry keys of node-1: %v, %v; want one", keys, err)
	}
	if ttl, err := e.rdb.PTTL(ctx, keys[0]).Result(); err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("TTL of %s = %v, %v; want the hour it was put with", keys[0], ttl, err)
	}

	// Put again with a TTL that has passed by the time anyone looks.
	if err := tel.Put(ctx, s, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := tel.Get(ctx, "node-1")
		if errors.Is(err, state.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sample did not expire: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := tel.Get(ctx, "node-2"); err != nil {
		t.Errorf("node-2's sample expired too early: %v", err)
	}
}
