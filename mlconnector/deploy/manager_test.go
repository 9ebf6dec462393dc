package deploy_test

import (
	"context"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/deploy"
	"github.com/mlsysops-go/mlsysops/mlconnector/internal/dbtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	"github.com/mlsysops-go/mlsysops/mlconnector/ops"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
	"github.com/mlsysops-go/mlsysops/mlconnector/runtimes"
	nbapi "github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/client"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// fakeNB is the northbound API as the manager sees it: the applications
// it holds, and the removals asked of it.
type fakeNB struct {
	mu      sync.Mutex
	apps    map[string]string // id → phase
	removed []string
}

func (f *fakeNB) Submit(context.Context, []byte, string) error         { return nil }
func (f *fakeNB) Update(context.Context, string, []byte, string) error { return nil }
func (f *fakeNB) Remove(_ context.Context, id string, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	if _, ok := f.apps[id]; ok {
		f.apps[id] = "Removing"
	}
	return nil
}
func (f *fakeNB) Get(_ context.Context, id string) (nbapi.Application, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	phase, ok := f.apps[id]
	if !ok {
		return nbapi.Application{}, &client.Error{StatusCode: http.StatusNotFound}
	}
	return nbapi.Application{Summary: nbapi.Summary{ID: id, Phase: phase}}, nil
}

// A deployment whose submission the northbound API accepted but whose
// record of it was lost (the database down between the two, as the chaos
// soak found with seed 3) is removed from the API when deleted, not
// forgotten with its application left running.
func TestDeleteRemovesUnrecordedSubmission(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.Pool(t)
	store, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(pool, store, registry.Options{Logger: dbtest.Logger(t)})
	m, err := reg.CreateModel(ctx, api.ModelSpec{ModelName: "iris", ModelKind: "classification",
		FeatureList: []api.Feature{{FeatureName: "x", Type: api.FeatureContinuous}, {FeatureName: "target", Type: api.FeatureCategorical, Kind: api.FeatureTarget}}}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// Generation 1, submitted_generation still 0: the record was lost.
	if _, err := pool.Exec(ctx, `INSERT INTO deployments (id, model_id, owner, spec, version, phase, serving)
		VALUES ('lost', $1, 'alice', '{}', 1, 'Placing', '{"runtime": "modelserver", "port": 8080}')`, m.ModelID); err != nil {
		t.Fatal(err)
	}
	nb := &fakeNB{apps: map[string]string{"lost": "Running"}}
	key, err := deploy.Key(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := deploy.New(pool, reg, runtimes.New(pool, runtimes.BuiltIn("modelserver", 8080)), nb, ops.New(pool), key,
		deploy.Options{Logger: dbtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := mgr.Delete(ctx, "lost"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(nb.removed, []string{"lost"}) {
		t.Fatalf("removals asked of the northbound API: %v, want [lost]", nb.removed)
	}
	d, err := mgr.Get(ctx, "lost")
	if err != nil || d.Phase != api.PhaseDeleting {
		t.Fatalf("while its application is being removed the deployment is %q (%v), want %s", d.Phase, err, api.PhaseDeleting)
	}

	// The application gone, the deployment goes too.
	nb.mu.Lock()
	delete(nb.apps, "lost")
	nb.mu.Unlock()
	if _, err := mgr.Delete(ctx, "lost"); err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.Get(ctx, "lost"); err == nil {
		t.Errorf("the deployment is still there once its application is gone")
	}
}
