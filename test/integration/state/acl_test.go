package state_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// addACLUsers defines every component's ACL user on every server of the
// deployment (ACLs are per server: a Cluster's nodes or a Sentinel
// group's master each need them) and returns their passwords.
func addACLUsers(t *testing.T, e *env, ctx context.Context) map[state.Component]string {
	t.Helper()
	pws := map[state.Component]string{}
	for _, c := range state.Components() {
		pws[c] = services.RandomSecret()
		line, err := state.ACLUserLine(state.ACLUserName(c), c, "", pws[c])
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, pws[c]) {
			t.Fatalf("the ACL line of %s holds its password in clear", c)
		}
		args := []any{"ACL", "SETUSER"}
		for _, f := range strings.Fields(line)[1:] {
			args = append(args, f)
		}
		if cc, ok := e.rdb.(*redis.ClusterClient); ok {
			err = cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Do(ctx, args...).Err() })
		} else {
			err = e.rdb.Do(ctx, args...).Err()
		}
		if err != nil {
			t.Fatalf("ACL SETUSER %s: %v", c, err)
		}
	}
	return pws
}

// storeAs opens a store on the deployment as c's ACL user.
func storeAs(t *testing.T, e *env, c state.Component, pw string) *state.Store {
	t.Helper()
	cfg := e.redis.Config()
	cfg.Username, cfg.Password = state.ACLUserName(c), pw
	s, err := state.Open(cfg, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Client().Close() })
	return s
}

// noPerm checks that err is Redis's refusal of a command or a key to the
// user (in a MULTI block the refusal aborts the EXEC).
func noPerm(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "EXECABORT") {
		t.Errorf("%s: %v, want NOPERM", what, err)
	}
}

// TestACLUsers runs each component's Redis operations as its own ACL
// user (state.ACLRules) against a real Redis, in the order the system does
// them: the northbound submits, the continuum agent consumes and sets
// statuses, the cluster agent registers agents and writes telemetry, the
// northbound reads it all back. Then each user tries what it must not:
// other components' writes, keys outside the prefix, administrative
// commands; Redis refuses each with NOPERM. The default user with the
// password (the configuration without users) keeps working; a wrong
// password is refused, and no error says it.
func TestACLUsers(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	pws := addACLUsers(t, e, ctx)
	nb := storeAs(t, e, state.ComponentNorthbound, pws[state.ComponentNorthbound])
	cont := storeAs(t, e, state.ComponentContinuum, pws[state.ComponentContinuum])
	clus := storeAs(t, e, state.ComponentCluster, pws[state.ComponentCluster])

	// The northbound submits applications and ML deployments.
	for _, coll := range []func(*state.Store) *state.Collection{(*state.Store).Applications, (*state.Store).MLDeployments} {
		for i := 0; i < 3; i++ {
			if _, err := coll(nb).Submit(ctx, state.Submission{ID: fmt.Sprintf("app-%03d", i), Kind: state.KindDeploy, Spec: appSpec(i)}); err != nil {
				t.Fatalf("northbound submits: %v", err)
			}
		}
		if _, err := coll(nb).Submit(ctx, state.Submission{ID: "app-002", Kind: state.KindRemove}); err != nil {
			t.Fatalf("northbound asks a removal: %v", err)
		}
	}

	// The continuum agent consumes, sets statuses, forgets, sweeps.
	for _, coll := range []func(*state.Store) *state.Collection{(*state.Store).Applications, (*state.Store).MLDeployments} {
		c := coll(cont)
		q, err := c.Queue(ctx, "continuum", "continuum-0", state.QueueOptions{Count: 10, Block: 100 * time.Millisecond, ClaimIdle: time.Hour})
		if err != nil {
			t.Fatalf("continuum creates its group: %v", err)
		}
		es, err := q.Read(ctx)
		if err != nil || len(es) != 4 {
			t.Fatalf("continuum reads: %d entries, %v", len(es), err)
		}
		for _, en := range es[:3] {
			if _, err := c.SetStatus(ctx, en.Submission.ID, state.StatusUpdate{Phase: mlsysopsv1.AppRunning, Message: "placed", Placement: map[string]string{"infer": "cluster-1"}}); err != nil {
				t.Fatalf("continuum sets a status: %v", err)
			}
			if err := q.Ack(ctx, en.ID); err != nil {
				t.Fatalf("continuum acknowledges: %v", err)
			}
		}
		if n, err := q.Pending(ctx); err != nil || n != 1 {
			t.Fatalf("continuum's pending entries: %d, %v", n, err)
		}
		if _, err := q.DeadLetters(ctx, 10); err != nil {
			t.Fatalf("continuum reads the dead letters: %v", err)
		}
		if err := c.Forget(ctx, "app-002"); err != nil {
			t.Fatalf("continuum forgets a removed id: %v", err)
		}
		page, err := c.Page(ctx, state.ListOptions{Phases: []mlsysopsv1.AppPhase{mlsysopsv1.AppRunning}})
		if err != nil || len(page.Items) != 2 {
			t.Fatalf("continuum pages the running ids: %+v, %v", page, err)
		}
		if _, err := c.ForgetIf(ctx, "app-001", "0-1"); err != nil {
			t.Fatalf("continuum's sweep: %v", err)
		}
	}
	// Agents register with the continuum (cluster agents) and the cluster
	// agents (node agents).
	if err := cont.Agents().Register(ctx, state.Agent{JID: "cluster-1@mlsysops.local", Layer: "cluster", Cluster: "cluster-1", Online: true}); err != nil {
		t.Fatalf("continuum registers a cluster agent: %v", err)
	}
	if err := cont.Agents().SetLiveness(ctx, "cluster-1@mlsysops.local", true, time.Now()); err != nil {
		t.Fatalf("continuum records liveness: %v", err)
	}
	if err := clus.Agents().Register(ctx, state.Agent{JID: "node-1@mlsysops.local", Layer: "node", Cluster: "cluster-1", Node: "node-1", Online: true}); err != nil {
		t.Fatalf("cluster agent registers a node agent: %v", err)
	}
	if err := clus.Agents().SetLiveness(ctx, "node-1@mlsysops.local", false, time.Now()); err != nil {
		t.Fatalf("cluster agent records liveness: %v", err)
	}
	if _, err := clus.Agents().List(ctx); err != nil {
		t.Fatalf("cluster agent lists agents: %v", err)
	}
	if err := clus.Telemetry().Put(ctx, state.Sample{Node: "node-1", Time: time.Now(), Metrics: map[string]float64{"cpu": 0.5}}, time.Minute); err != nil {
		t.Fatalf("cluster agent writes telemetry: %v", err)
	}

	// The northbound reads everything back.
	apps := nb.Applications()
	if st, err := apps.Status(ctx, "app-000"); err != nil || st.Phase != mlsysopsv1.AppRunning {
		t.Errorf("northbound reads a status: %+v, %v", st, err)
	}
	if _, err := apps.Spec(ctx, "app-000"); err != nil {
		t.Errorf("northbound reads a spec: %v", err)
	}
	if _, err := apps.Page(ctx, state.ListOptions{}); err != nil {
		t.Errorf("northbound pages: %v", err)
	}
	if _, err := apps.Phases(ctx); err != nil {
		t.Errorf("northbound reads the phases: %v", err)
	}
	if _, err := apps.Backlog(ctx); err != nil {
		t.Errorf("northbound reads the backlog: %v", err)
	}
	if list, err := nb.Agents().List(ctx); err != nil || len(list) != 2 {
		t.Errorf("northbound lists agents: %+v, %v", list, err)
	}
	if _, err := nb.Agents().Get(ctx, "node-1@mlsysops.local"); err != nil {
		t.Errorf("northbound reads an agent: %v", err)
	}
	if got, err := nb.Telemetry().GetMany(ctx, "node-1", "node-2"); err != nil || len(got) != 1 {
		t.Errorf("northbound reads telemetry: %v, %v", got, err)
	}
	for name, s := range map[string]*state.Store{"northbound": nb, "continuum": cont, "cluster": clus} {
		if err := s.Client().Ping(ctx).Err(); err != nil {
			t.Errorf("%s pings: %v", name, err)
		}
	}

	// What each must not do.
	noPerm(t, "northbound registers an agent", nb.Agents().Register(ctx, state.Agent{JID: "x@mlsysops.local", Layer: "node"}))
	if _, err := e.store.Agents().Get(ctx, "x@mlsysops.local"); err == nil {
		t.Error("the refused registration wrote the agent")
	}
	noPerm(t, "northbound writes telemetry", nb.Telemetry().Put(ctx, state.Sample{Node: "node-1", Time: time.Now()}, time.Minute))
	_, err := nb.Applications().Queue(ctx, "thief", "thief-0", state.QueueOptions{})
	noPerm(t, "northbound creates a consumer group", err)
	_, err = clus.Applications().Submit(ctx, state.Submission{ID: "evil", Kind: state.KindDeploy, Spec: appSpec(9)})
	noPerm(t, "cluster agent submits", err)
	_, err = clus.Applications().Status(ctx, "app-000")
	noPerm(t, "cluster agent reads a status", err)
	_, err = clus.Telemetry().Get(ctx, "node-1")
	noPerm(t, "cluster agent reads telemetry (write-only)", err)
	noPerm(t, "continuum writes telemetry", cont.Telemetry().Put(ctx, state.Sample{Node: "node-1", Time: time.Now()}, time.Minute))
	for name, s := range map[string]*state.Store{"northbound": nb, "continuum": cont, "cluster": clus} {
		rdb := s.Client()
		noPerm(t, name+" FLUSHALL", rdb.FlushAll(ctx).Err())
		noPerm(t, name+" CONFIG GET", rdb.ConfigGet(ctx, "requirepass").Err())
		noPerm(t, name+" KEYS", rdb.Keys(ctx, "*").Err())
		noPerm(t, name+" ACL LIST", rdb.Do(ctx, "ACL", "LIST").Err())
		noPerm(t, name+" GET outside the prefix", rdb.Get(ctx, "other:secret").Err())
		noPerm(t, name+" SET outside the prefix", rdb.Set(ctx, "other:secret", "x", 0).Err())
		noPerm(t, name+" script on a key outside the prefix", rdb.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"other:secret"}).Err())
		noPerm(t, name+" PUBLISH", rdb.Publish(ctx, "mlsysops:{apps}:x", "hi").Err())
	}
	// A script cannot reach past the user's keys either.
	noPerm(t, "northbound script writing the registry", nb.Client().Eval(ctx, "return redis.call('DEL', KEYS[1])", []string{"mlsysops:{agents}:index"}).Err())

	// The password-only configuration (the default user) still works.
	if _, err := e.store.Applications().Status(ctx, "app-000"); err != nil {
		t.Errorf("default user: %v", err)
	}
	// A wrong password for a component user is refused at login.
	cfg := e.redis.Config()
	const wrong = "Wrong-Redis-Password-0123456789"
	cfg.Username, cfg.Password = state.ACLUserName(state.ComponentNorthbound), wrong
	bad, err := state.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), wrong) {
		t.Errorf("wrong password: %v, want WRONGPASS without the password", err)
	}
	// Through the store, as a component sees it.
	_, err = state.New(bad, state.Options{}).Applications().Status(ctx, "app-000")
	if err == nil || strings.Contains(err.Error(), wrong) {
		t.Errorf("store with a wrong password: %v, want an error without the password", err)
	}
}
