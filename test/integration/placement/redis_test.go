package placement_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/agents/cluster"
	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// TestPlacementAcrossRedisMasterKill runs the path of a submission, Redis
// to running pods, on the Redis deployment $MLSYSOPS_TEST_REDIS_MODE names
// (`make test` runs it on a single server, a Sentinel group and a Cluster):
// a burst of applications is submitted as the northbound submits them
// (each retried with its request id until accepted) and the Redis master
// holding the submissions is killed with SIGKILL after the second. Each
// application ends Running in Redis and in Karmada, with exactly one
// PropagationPolicy and one Deployment per component, on one cluster; the
// removals then leave nothing.
func TestPlacementAcrossRedisMasterKill(t *testing.T) {
	const apps = 6
	rd := testbed.RedisForTest(t)
	rdb, err := state.NewClient(rd.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "intake")
	}
	store := state.New(rdb, state.Options{Logger: log})
	coll := store.Applications()
	a := startAgentsWith(t, func(cc *continuum.Controllers, _ map[string]*cluster.Controllers) {
		cc.Apps.Status = continuum.RedisStatus{Apps: coll}
	})
	ctx, cancel := context.WithCancel(context.Background())
	intake, err := continuum.NewIntake(ctx, store, a.karmada, "continuum-0", log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	intakeDone := make(chan struct{})
	go func() { defer close(intakeDone); _ = intake.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-intakeDone })

	ids := make([]string, apps)
	suffix := rand.String(4)
	for i := range ids {
		ids[i] = fmt.Sprintf("redis-%s-%s-%d", rd.Mode, suffix, i)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// What Redis holds, to tell a lost write from a lost delivery.
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		for _, id := range ids {
			st, err := coll.Status(dctx, id)
			t.Logf("Redis status of %s: %+v, %v", id, st, err)
		}
		q, err := coll.Queue(dctx, continuum.ConsumerGroup, "test-observer", state.QueueOptions{})
		if err == nil {
			n, err := q.Pending(dctx)
			t.Logf("submissions pending: %d, %v", n, err)
		}
	})
	submit := func(sub state.Submission) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := coll.Submit(sctx, sub)
			scancel()
			if err == nil {
				return
			}
			var conflict *state.ConflictError
			if errors.As(err, &conflict) || time.Now().After(deadline) {
				t.Fatalf("submit %s %s: %v", sub.Kind, sub.ID, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	spec := func(id string) []byte {
		return []byte(fmt.Sprintf(`{"MLSysOpsApp":{"name":%q,"components":[{"metadata":{"name":"web"},"containers":[{"image":"registry.example.org/web:1",`+
			`"platform_requirements":{"cpu":{"requests":"100m"},"memory":{"requests":"64Mi"}}}]}]}}`, id))
	}

	// The burst, with the kill after the second submission.
	var killed sync.Once
	for i, id := range ids {
		submit(state.Submission{ID: id, Kind: state.KindDeploy, Spec: spec(id), RequestID: "deploy-" + id})
		if i == 1 {
			killed.Do(func() { killMaster(t, rd) })
		}
	}
	if rd.Mode != state.ModeSingle {
		for _, r := range rd.Servers() {
			if !r.Running() {
				if err := r.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	// Each Running once, in Redis and in Karmada.
	for _, id := range ids {
		a.waitPhase(t, id, mlsysopsv1.AppRunning, 3*time.Minute)
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			st, err := coll.Status(ctx, id)
			return err == nil && st.Phase == mlsysopsv1.AppRunning, nil
		})
		if err != nil {
			st, serr := coll.Status(ctx, id)
			t.Fatalf("Redis status of %s: %+v, %v", id, st, serr)
		}
		if err := a.placedOnce(ctx, id, 1); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}

	// Removal through Redis leaves nothing.
	for _, id := range ids {
		submit(state.Submission{ID: id, Kind: state.KindRemove, RequestID: "remove-" + id})
	}
	for _, id := range ids {
		err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := coll.Status(ctx, id)
			if !errors.Is(err, state.ErrNotFound) {
				return false, nil
			}
			return a.placedOnce(ctx, id, 0) == nil, nil
		})
		if err != nil {
			t.Errorf("%s not removed everywhere: %v", id, a.placedOnce(ctx, id, 0))
		}
	}
}

// killMaster kills the Redis master holding the submissions and waits for
// its replacement: the failover of a Sentinel group or a Cluster, or the
// restart of a single server.
func killMaster(t *testing.T, rd *testbed.RedisDeployment) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	victim, err := rd.MasterFor(ctx, "{apps}")
	if err != nil {
		t.Fatal(err)
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if rd.Mode == state.ModeSingle {
		for victim.Running() {
			time.Sleep(20 * time.Millisecond)
		}
		if err := victim.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}
	now, err := rd.WaitFailover(ctx, "{apps}", victim)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: killed master %s; %s took over after %s", rd.Mode, victim.Addr(), now.Addr(), time.Since(killed).Round(time.Millisecond))
}

// placedOnce checks that the application is placed on one cluster (want
// 1) or has no binding left (want 0), and, over all member clusters, has
// want Deployments per component (its one component, "web"), all in one
// cluster.
func (a *agents) placedOnce(ctx context.Context, id string, want int) error {
	placed, found, err := continuum.Placement(ctx, a.karmada, id)
	if err != nil || (want > 0 && !found) {
		return fmt.Errorf("no ResourceBinding or Works in Karmada (%v)", err)
	}
	if found && (want == 0 || len(placed) != 1) {
		return fmt.Errorf("Karmada places it on %v, want %d cluster(s)", placed, want)
	}
	deps, clusters := 0, 0
	for _, name := range a.env.Clusters {
		cs, err := a.env.ClientConfig(name)
		if err != nil {
			return err
		}
		list, err := kubernetes.NewForConfigOrDie(cs).AppsV1().Deployments(members.Namespace(id)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		deps += len(list.Items)
		if len(list.Items) > 0 {
			clusters++
		}
	}
	if deps != want || clusters > 1 {
		return fmt.Errorf("%d Deployments in %d clusters, want %d in at most one", deps, clusters, want)
	}
	return nil
}
