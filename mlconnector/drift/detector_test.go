package drift_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/drift"
	"github.com/mlsysops-go/mlsysops/mlconnector/internal/dbtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	"github.com/mlsysops-go/mlsysops/mlconnector/ops"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

type fixture struct {
	Name      string    `json:"name"`
	Reference []float64 `json:"reference"`
	Current   []float64 `json:"current"`
	KS        struct {
		Statistic float64 `json:"statistic"`
		PValue    float64 `json:"p_value"`
	} `json:"ks"`
	Welch struct {
		Statistic float64 `json:"statistic"`
		PValue    float64 `json:"p_value"`
	} `json:"welch_t"`
}

func shifted(t *testing.T) fixture {
	b, err := os.ReadFile("testdata/scipy_fixtures.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Continuous []fixture `json:"continuous"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Continuous {
		if c.Name == "shifted" {
			return c
		}
	}
	t.Fatal("no shifted fixture")
	return fixture{}
}

// TestDetectorEndToEnd: a model with drift on (KS), its training data, and
// shifted inputs in the operations log: the run stores the drifting
// continuous feature with SciPy's p-value and the categorical one with
// chi-squared; the results are listed and charted.
func TestDetectorEndToEnd(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.Pool(t)
	store, _ := objstore.NewFS(t.TempDir())
	reg := registry.New(pool, store, registry.Options{})
	m, err := reg.CreateModel(ctx, api.ModelSpec{ModelName: "m", ModelKind: "regression",
		FeatureList: []api.Feature{
			{FeatureName: "x", Type: api.FeatureContinuous, Kind: api.FeatureInput},
			{FeatureName: "colour", Type: api.FeatureCategorical, Kind: api.FeatureInput},
			{FeatureName: "y", Type: api.FeatureContinuous, Kind: api.FeatureTarget},
		},
		DriftDetection: api.DriftList{{IsTrue: 1, Method: api.DriftKS}}}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	fx := shifted(t)
	var csv strings.Builder
	csv.WriteString("x,colour,y\n")
	for i, v := range fx.Reference {
		colour := "red"
		if i%2 == 0 {
			colour = "blue"
		}
		fmt.Fprintf(&csv, "%s,%s,1\n", strconvG(v), colour)
	}
	if _, err := reg.Upload(ctx, registry.UploadRequest{ModelID: m.ModelID, Kind: api.FileData, FileName: "train.csv",
		Body: strings.NewReader(csv.String()), Size: int64(csv.Len())}); err != nil {
		t.Fatal(err)
	}
	det, err := drift.New(reg, drift.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := det.Run(ctx, m.ModelID, "manual"); err == nil || !strings.Contains(err.Error(), "at least 10") {
		t.Fatalf("a run without inputs: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO deployments (id, model_id, owner, spec, version, phase) VALUES ('d1', $1, 'alice', '{}', 1, 'Ready')`, m.ModelID); err != nil {
		t.Fatal(err)
	}
	log := ops.New(pool)
	for i, v := range fx.Current {
		colour := "green" // a category the training data never had
		if i%3 == 0 {
			colour = "red"
		}
		data, _ := json.Marshal(map[string]any{"x": v, "colour": colour})
		if _, err := log.Insert(ctx, api.Operation{DeploymentID: "d1", ModelID: m.ModelID, ModelVersion: 1, OwnerID: "alice", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	run, err := det.Run(ctx, m.ModelID, "manual")
	if err != nil {
		t.Fatal(err)
	}
	if run.SampleSize != len(fx.Current) || run.ReferenceSize != len(fx.Reference) || len(run.Results) != 2 || run.Drifting != 2 {
		t.Fatalf("run %+v", run)
	}
	for _, r := range run.Results {
		switch r.Feature {
		case "x":
			if r.Method != drift.MethodKS || math.Abs(*r.PValue-fx.KS.PValue) > 1e-6 || math.Abs(r.Statistic-fx.KS.Statistic) > 1e-6 || !r.Drift {
				t.Errorf("x: %+v (p %v), SciPy D %v p %v", r, *r.PValue, fx.KS.Statistic, fx.KS.PValue)
			}
		case "colour":
			if r.Method != drift.MethodChi2 || r.Type != api.FeatureCategorical || !r.Drift {
				t.Errorf("colour: %+v", r)
			}
		}
	}
	// With the mean-shift method, Welch's t-test gives SciPy's p-value.
	if _, err := pool.Exec(ctx, `UPDATE models SET drift = '[{"is_true": 1, "method": 0}]' WHERE id = $1`, m.ModelID); err != nil {
		t.Fatal(err)
	}
	run2, err := det.Run(ctx, m.ModelID, "manual")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range run2.Results {
		if r.Feature == "x" && (r.Method != drift.MethodWelch || math.Abs(*r.PValue-fx.Welch.PValue) > 1e-6) {
			t.Errorf("welch: %+v (p %v), SciPy p %v", r, *r.PValue, fx.Welch.PValue)
		}
	}
	list, next, err := det.Results(ctx, m.ModelID, 0, 3)
	if err != nil || len(list) != 3 || next == 0 || list[0].RunID != run2.ID {
		t.Fatalf("results page: %d, next %d, %v", len(list), next, err)
	}
	rest, next2, err := det.Results(ctx, m.ModelID, next, 10)
	if err != nil || len(rest) != 1 || next2 != 0 {
		t.Fatalf("second page: %d, next %d, %v", len(rest), next2, err)
	}
	b, err := det.Chart(ctx, m.ModelID)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds().Dx() != 900 {
		t.Fatalf("chart: %v %v", img.Bounds(), err)
	}
	if err := os.WriteFile(t.TempDir()+"/chart.png", b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The scheduled pass checks this model too.
	det.RunAll(ctx)
	var runs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM drift_runs WHERE model_id = $1 AND trigger = 'scheduled'`, m.ModelID).Scan(&runs); err != nil || runs != 1 {
		t.Fatalf("scheduled runs %d, %v", runs, err)
	}
	// Deleting the model deletes its drift results.
	if err := reg.DeleteModel(ctx, m.ModelID); err == nil {
		t.Fatal("a model with a deployment was deleted")
	}
	if _, err := pool.Exec(ctx, `DELETE FROM deployments WHERE id = 'd1'`); err != nil {
		t.Fatal(err)
	}
	if err := reg.DeleteModel(ctx, m.ModelID); err != nil {
		t.Fatal(err)
	}
	var left int
	_ = pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM drift_results) + (SELECT count(*) FROM drift_runs) + (SELECT count(*) FROM operations)`).Scan(&left)
	if left != 0 {
		t.Fatalf("%d drift or operation rows left", left)
	}
}

func strconvG(v float64) string { return fmt.Sprintf("%.9g", v) }
