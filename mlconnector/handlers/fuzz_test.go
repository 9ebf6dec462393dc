package handlers_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mlsysops-go/mlsysops/mlconnector/api"
)

// FuzzModelBody: whatever the body of POST /v1/models, the answer is a
// 201 or a 4xx problem, never a 5xx, and an accepted model reads back.
// go test -fuzz FuzzModelBody ./mlconnector/handlers/ explores further.
func FuzzModelBody(f *testing.F) {
	for _, s := range []string{
		modelBody(), `{"modelname": "a", "modelkind": "b"}`, `{"modelname": "a", "modelkind": "b", "drift_detection": null}`,
		`{"modelname": "a", "modelkind": "b", "hyperparameter": [{"parameter": "p", "value": "\u0000"}]}`,
		`{"modelname": "\ud800", "modelkind": "b"}`, `{"modelname": "a", "modelkind": "b", "featurelist": [{"feature_name": "x", "type": "cont", "kind": 1e400}]}`,
		`{"modelname": "a", "modelkind": "b", "modeltags": ["x", "x"]}`, `[]`, `null`, `{"modelname": {"a": 1}}`,
		`{"modelname": "a", "modelkind": "b", "drift_detection": {"is_true": 1, "method": 2}, "featurelist": [{"feature_name": "f", "type": "cat", "kind": 0}]}`,
	} {
		f.Add([]byte(s))
	}
	e := newEnv(f, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		code, resp := e.request(t, http.MethodPost, "/v1/models", opToken, "application/json", body)
		switch {
		case code == http.StatusCreated:
			var m api.Model
			if err := json.Unmarshal(resp, &m); err != nil {
				t.Fatalf("201 with %s: %v", resp, err)
			}
			if c, got := e.request(t, http.MethodGet, "/v1/models/"+m.ModelID, opToken, "", nil); c != http.StatusOK {
				t.Fatalf("accepted model does not read back: %d %s", c, got)
			}
		case code >= 400 && code < 500:
			problem(t, resp)
		default:
			t.Fatalf("POST /v1/models %q: %d %s", body, code, resp)
		}
	})
}

// FuzzDeploymentBody: a deployment request either fails validation with
// field problems or is valid, normalised once (validating again changes
// nothing) and survives a JSON round trip.
func FuzzDeploymentBody(f *testing.F) {
	for _, s := range []string{
		`{"modelid": "3f1c7a52-0c0e-4b6e-9a57-6b8f0f7a1d10", "ownerid": "a"}`,
		`{"modelid": "3f1c7a52-0c0e-4b6e-9a57-6b8f0f7a1d10", "ownerid": "a", "deployment_id": "", "placement": {"clusterID": "*", "node": "*", "continuum": "Cloud"}, "inference_data": 0}`,
		`{"modelid": "x", "ownerid": "", "version": {"a": 1}}`, `{"version": 1e99}`, `{"version": -1}`,
		`{"resources": {"cpu": "1e400", "memory": "-1", "gpu": {"count": 99999999999}}}`, `{"image": "UPPER/Case:tag"}`,
		`{"deployment_id": "a-very-long-deployment-id-that-goes-well-beyond-fifty-characters"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var spec api.DeploymentSpec
		if json.Unmarshal(body, &spec) != nil {
			return
		}
		ps := spec.Validate()
		if len(ps) > 0 {
			for _, p := range ps {
				if p.Type == "" || p.Message == "" {
					t.Fatalf("problem without a type or message: %+v", p)
				}
			}
			return
		}
		if again := spec.Validate(); len(again) > 0 {
			t.Fatalf("valid once, invalid after normalising: %+v", again)
		}
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		var back api.DeploymentSpec
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("round trip of %s: %v", b, err)
		}
		if ps := back.Validate(); len(ps) > 0 {
			t.Fatalf("round trip of %s is invalid: %+v", b, ps)
		}
	})
}
