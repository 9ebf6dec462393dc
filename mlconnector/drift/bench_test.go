package drift_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/drift"
	"github.com/mlsysops-go/mlsysops/mlconnector/internal/dbtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

// BenchmarkDriftJob: one drift check of a model with four continuous
// features and a categorical one, against 10,000 training rows, over
// 100,000 recorded operations (read from a real PostgreSQL, compared with
// Kolmogorov–Smirnov and chi-squared, stored).
func BenchmarkDriftJob(b *testing.B) {
	ctx := context.Background()
	pool := dbtest.Pool(b)
	store, _ := objstore.NewFS(b.TempDir())
	reg := registry.New(pool, store, registry.Options{})
	features := []api.Feature{{FeatureName: "colour", Type: api.FeatureCategorical, Kind: api.FeatureInput}}
	for i := range 4 {
		features = append(features, api.Feature{FeatureName: fmt.Sprintf("x%d", i), Type: api.FeatureContinuous, Kind: api.FeatureInput})
	}
	m, err := reg.CreateModel(ctx, api.ModelSpec{ModelName: "bench", ModelKind: "classification", FeatureList: features,
		DriftDetection: api.DriftList{{IsTrue: 1, Method: api.DriftKS}}}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	colours := []string{"red", "green", "blue"}
	var csv strings.Builder
	csv.WriteString("colour,x0,x1,x2,x3\n")
	for range 10000 {
		fmt.Fprintf(&csv, "%s,%.6f,%.6f,%.6f,%.6f\n", colours[rng.IntN(3)], rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64())
	}
	if _, err := reg.Upload(ctx, registry.UploadRequest{ModelID: m.ModelID, Kind: api.FileData, FileName: "train.csv",
		Body: strings.NewReader(csv.String()), Size: int64(csv.Len())}); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO deployments (id, model_id, owner, spec, version, phase) VALUES ('d1', $1, 'bench', '{}', 1, 'Ready')`, m.ModelID); err != nil {
		b.Fatal(err)
	}
	const n = 100_000
	rows := make([][]any, n)
	now := time.Now()
	for i := range rows {
		in := fmt.Sprintf(`{"colour": %q, "x0": %.6f, "x1": %.6f, "x2": %.6f, "x3": %.6f}`, colours[rng.IntN(3)],
			rng.NormFloat64()+0.1, rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64())
		rows[i] = []any{"d1", m.ModelID, 1, "bench", []byte(in), now.Add(-time.Duration(i) * time.Millisecond)}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"operations"}, []string{"deployment_id", "model_id", "version", "owner", "input", "created_at"},
		pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE operations`); err != nil {
		b.Fatal(err)
	}
	det, err := drift.New(reg, drift.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		run, err := det.Run(ctx, m.ModelID, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if run.SampleSize != n || len(run.Results) != 5 {
			b.Fatalf("run of %d samples, %d results", run.SampleSize, len(run.Results))
		}
	}
	b.ReportMetric(float64(n), "operations")
}
