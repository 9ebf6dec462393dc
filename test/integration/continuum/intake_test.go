package continuum_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// Submissions queued in Redis (as the northbound API queues them) become
// applications in Karmada; their status flows back to Redis; a bad one is
// Failed with its field path; removal deletes the application and forgets
// its Redis state.
func TestIntakeFromRedisToKarmadaAndBack(t *testing.T) {
	env := testbed.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, kc, log := intakeDeps(t, env, "test-intake-")
	ctrls, err := continuum.NewControllers(ctx, env.RESTConfig(t, testbed.ContextKarmada), nil, log)
	if err != nil {
		t.Fatal(err)
	}
	ctrls.Apps.Status = continuum.RedisStatus{Apps: store.Applications()}
	intake, err := continuum.NewIntake(ctx, store, kc, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { _ = ctrls.Start(ctx); done <- struct{}{} }()
	go func() { _ = intake.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	waitAppAPI(t, env)

	spec, err := os.ReadFile("../../../examples/apps/gpu-inference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(spec)
	if err != nil {
		t.Fatal(err)
	}
	apps := store.Applications()
	id := "intake-" + rand.String(5)
	if _, err := apps.Submit(ctx, state.Submission{ID: id, Kind: state.KindDeploy, Spec: js}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kc.Delete(context.Background(), &mlsysopsv1.MLSysOpsApp{ObjectMeta: metaName(id)})
	})
	st := waitRedisPhase(t, apps, id, string(mlsysopsv1.AppDeploying))
	if !strings.Contains(st.Message, "cloud-1") {
		t.Errorf("Redis status message %q does not name cloud-1", st.Message)
	}
	app := &mlsysopsv1.MLSysOpsApp{}
	if err := kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: id}, app); err != nil {
		t.Fatalf("application not in Karmada: %v", err)
	}
	if len(app.Spec.Components) != 2 || app.Spec.Components[0].Metadata.Name != "llm-server" {
		t.Errorf("spec in Karmada = %+v", app.Spec.Components)
	}

	bad := "intake-bad-" + rand.String(5)
	if _, err := apps.Submit(ctx, state.Submission{ID: bad, Kind: state.KindDeploy, Spec: []byte(`{"MLSysOpsApp":{"components":[{"metadata":{"name":"x"},"containers":[{"image":""}]}]}}`)}); err != nil {
		t.Fatal(err)
	}
	st = waitRedisPhase(t, apps, bad, string(mlsysopsv1.AppFailed))
	if !strings.Contains(st.Message, "containers[0].image") {
		t.Errorf("failure message %q has no field path", st.Message)
	}

	if _, err := apps.Submit(ctx, state.Submission{ID: id, Kind: state.KindRemove}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: id}, &mlsysopsv1.MLSysOpsApp{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		_, err = apps.Status(ctx, id)
		return errors.Is(err, state.ErrNotFound), nil
	})
	if err != nil {
		t.Fatalf("removal did not delete the application and forget its Redis state: %v", err)
	}
}

// intakeDeps is what an intake needs on the shared testbed: a store under
// a prefix of its own (prefix and a random suffix) on the testbed's Redis,
// a client of the Karmada API, and a silent logger.
func intakeDeps(t *testing.T, env *testbed.Env, prefix string) (*state.Store, client.Client, *slog.Logger) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rdb := redis.NewClient(&redis.Options{Addr: env.RedisAddr, Password: env.RedisPassword})
	t.Cleanup(func() { rdb.Close() })
	store := state.New(rdb, state.Options{Prefix: prefix + rand.String(5), Logger: log})
	scheme, _ := continuum.Scheme()
	kc, err := client.New(env.RESTConfig(t, testbed.ContextKarmada), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return store, kc, log
}

func waitRedisPhase(t *testing.T, apps *state.Collection, id, phase string) state.Status {
	t.Helper()
	var st state.Status
	err := wait.PollUntilContextTimeout(context.Background(), 300*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		st, err = apps.Status(ctx, id)
		return err == nil && string(st.Phase) == phase, nil
	})
	if err != nil {
		t.Fatalf("Redis status of %s never %s; last %+v", id, phase, st)
	}
	return st
}

// TestRedeliveredSubmissionIsDropped: a submission delivered again after a
// later one of the same application was handled (its consumer died, or
// its acknowledgement was lost, first) changes nothing: a deploy delivered
// again after the removal does not bring the application back, neither
// while the removal runs nor once its status is forgotten; the
// application's latest submission still applies. (Found by the chaos
// soak, seed 4: a removed application re-created.)
func TestRedeliveredSubmissionIsDropped(t *testing.T) {
	env := testbed.Shared(t)
	ctx := context.Background()
	store, kc, log := intakeDeps(t, env, "test-redelivered-")
	intake, err := continuum.NewIntake(ctx, store, kc, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	waitAppAPI(t, env)
	apps := store.Applications()
	id := "redelivered-" + rand.String(5)
	t.Cleanup(func() {
		_ = kc.Delete(context.Background(), &mlsysopsv1.MLSysOpsApp{ObjectMeta: metaName(id)})
	})
	spec := []byte(`{"MLSysOpsApp":{"name":"x","components":[{"metadata":{"name":"web"},"containers":[{"image":"registry.example.org/web:1"}]}]}}`)
	deploy := state.Submission{ID: id, Kind: state.KindDeploy, Spec: spec}
	handle := func(what string, sub state.Submission, r state.Receipt) {
		t.Helper()
		if err := intake.Handle(ctx, state.Entry{ID: r.StreamID, Submission: sub, Deliveries: 1}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	exists := func() bool {
		t.Helper()
		err := kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: id}, &mlsysopsv1.MLSysOpsApp{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	first, err := apps.Submit(ctx, deploy)
	if err != nil {
		t.Fatal(err)
	}
	handle("the deploy", deploy, first)
	if !exists() {
		t.Fatal("the deploy wrote no application")
	}
	remove := state.Submission{ID: id, Kind: state.KindRemove}
	r, err := apps.Submit(ctx, remove)
	if err != nil {
		t.Fatal(err)
	}
	handle("the removal", remove, r)
	if exists() {
		t.Fatal("the removal left the application")
	}
	handle("the deploy again, the removal running", deploy, first)
	if exists() {
		t.Error("the deploy delivered again after the removal brought the application back")
	}
	if err := apps.Forget(ctx, id); err != nil {
		t.Fatal(err)
	}
	handle("the deploy again, the removal done", deploy, first)
	if exists() {
		t.Error("the deploy delivered again after the removal was done brought the application back")
	}
	again, err := apps.Submit(ctx, deploy)
	if err != nil {
		t.Fatal(err)
	}
	handle("a new deploy", deploy, again)
	if !exists() {
		t.Error("a new deploy after the removal wrote no application")
	}
}
