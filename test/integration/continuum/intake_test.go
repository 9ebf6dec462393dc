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

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
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
	// Created claimed for the applications' policy, Karmada's detector
	// bound it without a write of its own: every write to the object
	// but its status is the intake's create.
	pp := &policyv1alpha1.PropagationPolicy{}
	if err := kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: continuum.AppPropagationPolicy}, pp); err != nil {
		t.Fatal(err)
	}
	if id := pp.Labels[policyv1alpha1.PropagationPolicyPermanentIDLabel]; id == "" || app.Labels[policyv1alpha1.PropagationPolicyPermanentIDLabel] != id {
		t.Errorf("claim label %q, the policy's permanent id %q", app.Labels[policyv1alpha1.PropagationPolicyPermanentIDLabel], id)
	}
	for _, mf := range app.ManagedFields {
		if mf.Subresource == "" && strings.Contains(mf.Manager, "karmada") {
			t.Errorf("application written by %s (%s at %v): its claim should have been there", mf.Manager, mf.Operation, mf.Time)
		}
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
	f := newIntakeFixture(t, "redelivered")
	deploy := f.submission(state.KindDeploy, "registry.example.org/web:1")
	first := f.submit(deploy)
	f.handle("the deploy", deploy, first)
	if !f.exists() {
		t.Fatal("the deploy wrote no application")
	}
	remove := state.Submission{ID: f.id, Kind: state.KindRemove}
	f.handle("the removal", remove, f.submit(remove))
	if f.exists() {
		t.Fatal("the removal left the application")
	}
	f.handle("the deploy again, the removal running", deploy, first)
	if f.exists() {
		t.Error("the deploy delivered again after the removal brought the application back")
	}
	if err := f.apps.Forget(f.ctx, f.id); err != nil {
		t.Fatal(err)
	}
	f.handle("the deploy again, the removal done", deploy, first)
	if f.exists() {
		t.Error("the deploy delivered again after the removal was done brought the application back")
	}
	f.handle("a new deploy", deploy, f.submit(deploy))
	if !f.exists() {
		t.Error("a new deploy after the removal wrote no application")
	}
}

// intakeFixture is an intake (no controllers) on a shared testbed's Karmada
// and a Redis prefix of its own, and one application id.
type intakeFixture struct {
	t      *testing.T
	ctx    context.Context
	intake *continuum.Intake
	kc     client.Client
	apps   *state.Collection
	id     string
}

func newIntakeFixture(t *testing.T, name string) *intakeFixture {
	t.Helper()
	env := testbed.Shared(t)
	ctx := context.Background()
	store, kc, log := intakeDeps(t, env, "test-"+name+"-")
	intake, err := continuum.NewIntake(ctx, store, kc, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	waitAppAPI(t, env)
	id := name + "-" + rand.String(5)
	t.Cleanup(func() {
		_ = kc.Delete(context.Background(), &mlsysopsv1.MLSysOpsApp{ObjectMeta: metaName(id)})
	})
	return &intakeFixture{t: t, ctx: ctx, intake: intake, kc: kc, apps: store.Applications(), id: id}
}

// submission is a deploy or update of the fixture's application.
func (f *intakeFixture) submission(kind state.Kind, image string) state.Submission {
	spec := `{"MLSysOpsApp":{"name":"x","components":[{"metadata":{"name":"web"},"containers":[{"image":"` + image + `"}]}]}}`
	return state.Submission{ID: f.id, Kind: kind, Spec: []byte(spec)}
}

// handle has the intake handle sub, accepted as r.
func (f *intakeFixture) handle(what string, sub state.Submission, r state.Receipt) {
	f.t.Helper()
	if err := f.intake.Handle(f.ctx, state.Entry{ID: r.StreamID, Submission: sub, Deliveries: 1}); err != nil {
		f.t.Fatalf("%s: %v", what, err)
	}
}

// submit accepts sub as the northbound API does.
func (f *intakeFixture) submit(sub state.Submission) state.Receipt {
	f.t.Helper()
	r, err := f.apps.Submit(f.ctx, sub)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// exists reports whether Karmada has the application.
func (f *intakeFixture) exists() bool {
	f.t.Helper()
	err := f.kc.Get(f.ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: f.id}, &mlsysopsv1.MLSysOpsApp{})
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return err == nil
}

// image is the image of the application's component in Karmada.
func (f *intakeFixture) image() string {
	f.t.Helper()
	var app mlsysopsv1.MLSysOpsApp
	if err := f.kc.Get(f.ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: f.id}, &app); err != nil {
		f.t.Fatal(err)
	}
	if len(app.Spec.Components) == 0 || len(app.Spec.Components[0].Containers) == 0 {
		f.t.Fatalf("application %s has no container: %+v", f.id, app.Spec)
	}
	return app.Spec.Components[0].Containers[0].Image
}

// TestUpdateOfAppDeletedMeanwhileDropped: an update accepted while the
// continuum agent was down, of an application then deleted from Karmada
// (kubectl delete) before the agent came back, is not applied: the
// deletion came last, and applying the update created the application
// again (chaos soak, seed 28001, 5 minutes: cxccf9-any-13 Running again 8
// minutes after its deletion). Its status goes with the application. An
// update that never had a written application to lose (deploy and update
// both queued while the agent was down) still creates it, and an update
// of an application Karmada has applies.
func TestUpdateOfAppDeletedMeanwhileDropped(t *testing.T) {
	f := newIntakeFixture(t, "upd-deleted")
	deploy := f.submission(state.KindDeploy, "registry.example.org/web:1")
	f.handle("the deploy", deploy, f.submit(deploy))
	if !f.exists() {
		t.Fatal("the deploy wrote no application")
	}
	if st, err := f.apps.Status(f.ctx, f.id); err != nil || !st.Written {
		t.Fatalf("status after the deploy was written: %+v (%v), want Written", st, err)
	}
	update := f.submission(state.KindUpdate, "registry.example.org/web:2")
	f.handle("an update", update, f.submit(update))
	if got := f.image(); got != "registry.example.org/web:2" {
		t.Fatalf("the update of an application in Karmada not applied: image %s", got)
	}

	late := f.submission(state.KindUpdate, "registry.example.org/web:3")
	r := f.submit(late)
	if err := f.kc.Delete(f.ctx, &mlsysopsv1.MLSysOpsApp{ObjectMeta: metaName(f.id)}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(f.ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return !f.exists(), nil
	})
	if err != nil {
		t.Fatal("the application deleted from Karmada never went")
	}
	f.handle("the update accepted before the deletion", late, r)
	if f.exists() {
		t.Error("an update accepted before the application was deleted from Karmada created it again")
	}
	if st, err := f.apps.Status(f.ctx, f.id); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("status of the deleted application after its late update: %+v (%v), want forgotten", st, err)
	}

	// Deploy and update both waiting for the agent: the deploy is
	// superseded, the update writes the application.
	first := f.submit(deploy)
	queued := f.submit(update)
	f.handle("a deploy an update superseded", deploy, first)
	if st, err := f.apps.Status(f.ctx, f.id); err != nil || st.Written {
		t.Fatalf("status before anything was written: %+v (%v), want not Written", st, err)
	}
	f.handle("the update of a deploy never written", update, queued)
	if !f.exists() {
		t.Fatal("an update whose deploy was superseded wrote no application")
	}
	if got := f.image(); got != "registry.example.org/web:2" {
		t.Errorf("application written by the update has image %s, want the update's", got)
	}
}
