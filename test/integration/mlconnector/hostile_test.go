package mlconnector_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
)

// TestDeploymentHostileInput: every bad deployment request is a 4xx
// naming what is wrong, never a 5xx, and leaves nothing behind.
func TestDeploymentHostileInput(t *testing.T) {
	e := newEnv(t)
	testbed.StartTestAgents(t, e.tb, testbed.TestAgentsOptions{Nodes: true})
	m := e.model(t, irisSpec(uniq("iris")), "iris.onnx", fixture(t, "iris_mlp.onnx"), nil)
	ready := uniq("ready")
	if _, err := e.op.CreateDeployment(ctxT(t), api.DeploymentSpec{DeploymentID: ready, ModelID: m.ModelID, OwnerID: "dan"}); err != nil {
		t.Fatal(err)
	}
	e.waitPhase(t, ready, 3*time.Minute, func(d api.Deployment) bool { return d.Phase == api.PhaseReady })
	taken := ready
	missingModel := "00000000-0000-4000-8000-000000000000"
	good := func(extra string) string {
		return `{"modelid": "` + m.ModelID + `", "ownerid": "dan"` + extra + `}`
	}
	cases := []struct {
		name, method, path, token, body string
		status                          int
		field                           string
	}{
		{"viewer creates", "POST", "/v1/deployments", e.tb.NorthboundViewerToken, good(""), 403, ""},
		{"viewer predicts", "POST", "/v1/deployments/" + ready + "/predict", e.tb.NorthboundViewerToken, `{"data": {}}`, 403, ""},
		{"no token", "GET", "/v1/deployments", "", "", 401, ""},
		{"malformed", "POST", "/v1/deployments", e.tb.NorthboundToken, `{"modelid": `, 400, ""},
		{"unknown field", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "gpus": 1`), 422, "gpus"},
		{"missing model and owner", "POST", "/v1/deployments", e.tb.NorthboundToken, `{}`, 422, "modelid"},
		{"not a model id", "POST", "/v1/deployments", e.tb.NorthboundToken, `{"modelid": "../etc", "ownerid": "dan"}`, 422, "modelid"},
		{"unknown model", "POST", "/v1/deployments", e.tb.NorthboundToken, `{"modelid": "` + missingModel + `", "ownerid": "dan"}`, 422, "modelid"},
		{"unknown version", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "version": 9`), 422, "version"},
		{"unknown alias", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "version": "production"`), 422, "version"},
		{"version object", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "version": {"n": 1}`), 422, "version"},
		{"bad id", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "deployment_id": "Not_A_Label"`), 422, "deployment_id"},
		{"taken id", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "deployment_id": "` + taken + `"`), 409, ""},
		{"negative GPUs", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "resources": {"gpu": {"count": -1}}`), 422, "resources.gpu.count"},
		{"GPU model without a count", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "resources": {"gpu": {"model": "NVIDIA-L4"}}`), 422, "resources.gpu.count"},
		{"bad CPU", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "resources": {"cpu": "lots"}`), 422, "resources.cpu"},
		{"bad layer", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "placement": {"continuum": "fog"}`), 422, "placement.continuum"},
		{"bad image", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "image": "not an image"`), 422, "image"},
		{"unknown runtime", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "runtime": "triton"`), 422, "runtime"},
		{"link mode", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "inference_data": 1`), 422, "inference_data"},
		{"too many replicas", "POST", "/v1/deployments", e.tb.NorthboundToken, good(`, "replicas": 1000`), 422, "replicas"},
		{"unknown deployment", "GET", "/v1/deployments/no-such-deployment", e.tb.NorthboundToken, "", 404, ""},
		{"traversal", "GET", "/v1/deployments/..%2F..%2Fetc", e.tb.NorthboundToken, "", 404, ""},
		{"patch the owner", "PATCH", "/v1/deployments/" + ready, e.tb.NorthboundToken, `{"ownerid": "eve"}`, 422, "ownerid"},
		{"patch to nonsense", "PATCH", "/v1/deployments/" + ready, e.tb.NorthboundToken, `{"replicas": -3}`, 422, "replicas"},
		{"patch to a missing version", "PATCH", "/v1/deployments/" + ready, e.tb.NorthboundToken, `{"version": 5}`, 422, "version"},
		{"delete unknown", "DELETE", "/v1/deployments/no-such-deployment", e.tb.NorthboundToken, "", 404, ""},
		{"predict unknown", "POST", "/v1/deployments/no-such-deployment/predict", e.tb.NorthboundToken, `{"data": {}}`, 404, ""},
		{"predict without data", "POST", "/v1/deployments/" + ready + "/predict", e.tb.NorthboundToken, `{}`, 422, "data"},
		{"predict a string", "POST", "/v1/deployments/" + ready + "/predict", e.tb.NorthboundToken, `{"data": "x"}`, 422, "data"},
		{"predict missing features", "POST", "/v1/deployments/" + ready + "/predict", e.tb.NorthboundToken, `{"data": {"sepal_length": 1}}`, 422, "data.sepal_width"},
		{"predict unknown feature", "POST", "/v1/deployments/" + ready + "/predict", e.tb.NorthboundToken,
			`{"data": {"sepal_length": 1, "sepal_width": 1, "petal_length": 1, "petal_width": 1, "colour": "red"}}`, 422, "data.colour"},
		{"predict a word", "POST", "/v1/deployments/" + ready + "/predict", e.tb.NorthboundToken,
			`{"data": [{"sepal_length": "long", "sepal_width": 1, "petal_length": 1, "petal_width": 1}]}`, 422, "data[0].sepal_length"},
		{"explain a batch", "POST", "/v1/deployments/" + ready + "/predict", e.tb.NorthboundToken, `{"data": [{}, {}], "explanation": true}`, 422, "explanation"},
		{"explain unknown method", "POST", "/v1/deployments/" + ready + "/explain", e.tb.NorthboundToken,
			`{"data": {"sepal_length": 1, "sepal_width": 1, "petal_length": 1, "petal_width": 1}, "method": "magic"}`, 422, "method"},
		{"infer not JSON", "POST", "/v1/deployments/" + ready + "/infer", e.tb.NorthboundToken, `{"inputs": [`, 400, ""},
		{"operation without data", "POST", "/v1/operations", e.tb.NorthboundToken, `{"ownerid": "dan", "deploymentid": "` + ready + `", "modelid": "` + m.ModelID + `"}`, 422, "data"},
		{"operation of another model", "POST", "/v1/operations", e.tb.NorthboundToken,
			`{"ownerid": "dan", "deploymentid": "` + ready + `", "modelid": "` + missingModel + `", "data": 1}`, 422, "modelid"},
		{"operation with NUL", "POST", "/v1/operations", e.tb.NorthboundToken,
			`{"ownerid": "dan", "deploymentid": "` + ready + `", "modelid": "` + m.ModelID + `", "data": "\u0000"}`, 422, "data"},
		{"bad operations page", "GET", "/v1/operations?continue=@@", e.tb.NorthboundToken, "", 400, "continue"},
		{"download with no token", "GET", "/v1/downloads/" + ready + "/x", "", "", 403, ""},
		{"download of a file of no deployment", "GET", "/v1/downloads/no-such/x?token=abc", "", "", 403, ""},
		{"delete a model in use", "DELETE", "/v1/models/" + m.ModelID, e.tb.NorthboundToken, "", 409, ""},
		{"runtime replacing the built-in", "PUT", "/v1/runtimes/modelserver", e.tb.NorthboundToken, `{"formats": ["onnx"], "image": "x/y:1", "port": 80}`, 409, ""},
		{"runtime without image", "PUT", "/v1/runtimes/mine", e.tb.NorthboundToken, `{"formats": ["onnx"], "port": 80}`, 422, "image"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, e.tb.MLConnectorURL+c.path, bytes.NewReader([]byte(c.body)))
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, b, c.status)
			continue
		}
		var p httpapi.Problem
		if err := json.Unmarshal(b, &p); err != nil || p.Status != c.status {
			t.Errorf("%s: not a problem document: %s", c.name, b)
			continue
		}
		if c.field != "" && !strings.Contains(string(b), `"field":"`+c.field+`"`) {
			t.Errorf("%s: %s lacks field %s", c.name, b, c.field)
		}
	}
	// Nothing was created by the refused requests.
	p, err := e.op.Deployments(ctxT(t), "dan", "", 0, "")
	if err != nil || len(p.Items) != 1 {
		t.Errorf("dan's deployments after the battery: %d, %v", len(p.Items), err)
	}
}
