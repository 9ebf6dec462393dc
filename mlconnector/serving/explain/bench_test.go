package explain

import (
	"context"
	"testing"
)

// BenchmarkShapley: one explanation against 100 background rows: exact
// for the 10-feature regressor, sampled (the automatic budget) for the
// 30-feature classifier. Reports the model evaluations (rows) it took.
func BenchmarkShapley(b *testing.B) {
	for _, tc := range []struct {
		name   string
		method string
	}{{"diabetes_gbm", Exact}, {"cancer_gbm", Sampling}} {
		b.Run(tc.name+"/"+tc.method, func(b *testing.B) {
			f, width := treeFunction(b, tc.name)
			bg := background(b, tc.name, 100)
			x := bg[0]
			var evals int
			for range b.N {
				r, err := Shapley(context.Background(), f, width, x, bg, Options{Method: tc.method, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				evals = r.Evaluations
			}
			b.ReportMetric(float64(evals), "evaluations")
		})
	}
}
