package handlers_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
)

// TestServeThroughConnector: predictions and explanations of a Ready
// deployment go through the connector to a real model server (the
// LightGBM iris model, version "1" as the server names it) and come back
// as the fixture's reference says, with the deployment's version number.
func TestServeThroughConnector(t *testing.T) {
	connURL, _ := servedDeployment(t)
	ref := servingtest.LoadReference(t, "iris_gbm")
	var labels []int64
	if err := json.Unmarshal(ref.Outputs["label"], &labels); err != nil {
		t.Fatal(err)
	}
	post := func(t *testing.T, path string, body any, out any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, connURL+path, strings.NewReader(string(b)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+opToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			var p map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&p)
			t.Fatalf("POST %s: %s %v", path, resp.Status, p)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	for i, in := range ref.Inputs["input"][:5] {
		row := map[string]float64{}
		for j, f := range ref.Features {
			row[f] = in[j]
		}
		data, _ := json.Marshal(row)
		t.Run(fmt.Sprintf("row %d", i), func(t *testing.T) {
			var p api.Prediction
			post(t, "/v1/deployments/bench/predict", api.PredictRequest{Data: data}, &p)
			if got, ok := p.Inference.(float64); !ok || int64(got) != labels[i] || p.ModelVersion != 1 {
				t.Errorf("prediction %v (version %d), want label %d of version 1", p.Inference, p.ModelVersion, labels[i])
			}
			var x api.Explanation
			post(t, "/v1/deployments/bench/explain", api.ExplainRequest{Data: data}, &x)
			if x.ModelVersion != 1 || x.DeploymentID != "bench" || len(x.ShapleyValues) != len(ref.Features) || len(x.Prediction) == 0 {
				t.Fatalf("explanation %+v", x)
			}
			for k := range x.Prediction {
				sum := x.BaseValue[k]
				for f := range x.ShapleyValues {
					sum += x.ShapleyValues[f][k]
				}
				if math.Abs(sum-x.Prediction[k]) > 1e-6 {
					t.Errorf("output %d: base %g + Shapley values = %g, prediction %g", k, x.BaseValue[k], sum, x.Prediction[k])
				}
			}
		})
	}
}
