package handlers_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
)

// TestHostileInput: every bad request is a 4xx naming what is wrong, never
// a 5xx.
func TestHostileInput(t *testing.T) {
	e := newEnv(t, nil)
	var m api.Model
	e.json(http.MethodPost, "/v1/models", modelBody(), &m, http.StatusCreated)
	model := "/v1/models/" + m.ModelID
	const missing = "/v1/models/00000000-0000-4000-8000-000000000000"
	big := `{"modelname": "` + strings.Repeat("x", 5<<20) + `", "modelkind": "k"}`

	cases := []struct {
		name, method, path, token, ct, body string
		status                              int
		field                               string
	}{
		{"no token", "GET", "/v1/models", "", "", "", 401, ""},
		{"unknown token", "GET", "/v1/models", "not-a-token-0123456789", "", "", 401, ""},
		{"viewer writes", "POST", "/v1/models", viewerToken, "application/json", modelBody(), 403, ""},
		{"viewer deletes", "DELETE", model, viewerToken, "", "", 403, ""},
		{"no token on an unknown route", "GET", "/v1/nothing", "", "", "", 401, ""},
		{"unknown route", "GET", "/v1/nothing", opToken, "", "", 404, ""},
		{"wrong method", "PUT", "/v1/models", opToken, "application/json", "{}", 405, ""},
		{"malformed JSON", "POST", "/v1/models", opToken, "application/json", `{"modelname": `, 400, ""},
		{"two values", "POST", "/v1/models", opToken, "application/json", modelBody() + modelBody(), 400, ""},
		{"empty body", "POST", "/v1/models", opToken, "application/json", "", 400, ""},
		{"array body", "POST", "/v1/models", opToken, "application/json", "[1]", 422, ""},
		{"wrong type", "POST", "/v1/models", opToken, "application/json", `{"modelname": 5, "modelkind": "k"}`, 422, "modelname"},
		{"unknown field", "POST", "/v1/models", opToken, "application/json", `{"modelname": "a", "modelkind": "k", "owner": "x"}`, 422, "owner"},
		{"missing name", "POST", "/v1/models", opToken, "application/json", `{"modelkind": "k"}`, 422, "modelname"},
		{"bad feature type", "POST", "/v1/models", opToken, "application/json",
			`{"modelname": "a", "modelkind": "k", "featurelist": [{"feature_name": "x", "type": "cont", "kind": 0}, {"feature_name": "y", "type": "float", "kind": 0}]}`, 422, "featurelist[1].type"},
		{"duplicate feature", "POST", "/v1/models", opToken, "application/json",
			`{"modelname": "a", "modelkind": "k", "featurelist": [{"feature_name": "x", "type": "cont", "kind": 0}, {"feature_name": "x", "type": "cont", "kind": 0}]}`, 422, "featurelist[1].feature_name"},
		{"bad feature kind", "POST", "/v1/models", opToken, "application/json",
			`{"modelname": "a", "modelkind": "k", "featurelist": [{"feature_name": "x", "type": "cont", "kind": 7}]}`, 422, "featurelist[0].kind"},
		{"object as a scalar", "POST", "/v1/models", opToken, "application/json",
			`{"modelname": "a", "modelkind": "k", "hyperparameter": [{"parameter": "p", "value": {"x": 1}}]}`, 422, "hyperparameter.value"},
		{"NUL in a name", "POST", "/v1/models", opToken, "application/json", `{"modelname": "a\u0000b", "modelkind": "k"}`, 422, "modelname"},
		{"NUL in a scalar", "POST", "/v1/models", opToken, "application/json",
			`{"modelname": "a", "modelkind": "k", "hyperparameter": [{"parameter": "p", "value": "\u0000"}]}`, 422, "hyperparameter[0].value"},
		{"drift without inputs", "POST", "/v1/models", opToken, "application/json", `{"modelname": "a", "modelkind": "k", "drift_detection": {"is_true": 1, "method": 0}}`, 422, "drift_detection"},
		{"bad drift method", "POST", "/v1/models", opToken, "application/json",
			`{"modelname": "a", "modelkind": "k", "featurelist": [{"feature_name": "x", "type": "cont", "kind": 0}], "drift_detection": [{"is_true": 1, "method": 9}]}`, 422, "drift_detection[0].method"},
		{"bad tag", "POST", "/v1/models", opToken, "application/json", `{"modelname": "a", "modelkind": "k", "modeltags": ["a b"]}`, 422, "modeltags[0]"},
		{"long name", "POST", "/v1/models", opToken, "application/json", `{"modelname": "` + strings.Repeat("n", 101) + `", "modelkind": "k"}`, 422, "modelname"},
		{"huge body", "POST", "/v1/models", opToken, "application/json", big, 413, ""},
		{"text body", "POST", "/v1/models", opToken, "text/plain", modelBody(), 415, ""},
		{"latin1 body", "POST", "/v1/models", opToken, "application/json; charset=latin1", modelBody(), 415, ""},
		{"unknown model", "GET", missing, opToken, "", "", 404, ""},
		{"not a model id", "GET", "/v1/models/not-a-uuid", opToken, "", "", 404, ""},
		{"traversal in the id", "GET", "/v1/models/..%2F..%2Fetc%2Fpasswd/files", opToken, "", "", 404, ""},
		{"patch an unknown model", "PATCH", missing, opToken, "application/json", `{"modelname": "x"}`, 404, ""},
		{"patch to invalid", "PATCH", model, opToken, "application/json", `{"featurelist": [{"feature_name": "x", "type": "nope", "kind": 0}]}`, 422, "featurelist[0].type"},
		{"patch not an object", "PATCH", model, opToken, "application/json", `[1, 2]`, 400, ""},
		{"patch an unknown field", "PATCH", model, opToken, "application/json", `{"colour": "red"}`, 422, "colour"},
		{"delete an unknown model", "DELETE", missing, opToken, "", "", 404, ""},
		{"bad limit", "GET", "/v1/models?limit=0", opToken, "", "", 400, "limit"},
		{"bad continue", "GET", "/v1/models?continue=@@@", opToken, "", "", 400, ""},
		{"bad skip", "GET", "/model/all?skip=-1", opToken, "", "", 400, "skip"},
		{"search without tags", "GET", "/model/search", opToken, "", "", 400, "tags"},
		{"alias as a number", "PUT", model + "/aliases/123", opToken, "application/json", `{"version": 1}`, 422, "alias"},
		{"alias to version 0", "PUT", model + "/aliases/prod", opToken, "application/json", `{"version": 0}`, 422, "version"},
		{"alias to a missing version", "PUT", model + "/aliases/prod", opToken, "application/json", `{"version": 3}`, 404, ""},
		{"alias of an unknown model", "PUT", missing + "/aliases/prod", opToken, "application/json", `{"version": 1}`, 404, ""},
		{"unknown version", "GET", model + "/versions/9", opToken, "", "", 404, ""},
		{"version zero", "GET", model + "/versions/0", opToken, "", "", 404, ""},
		{"unknown file", "GET", model + "/files/00000000-0000-4000-8000-000000000000/content", opToken, "", "", 404, ""},
		{"upload not multipart", "POST", model + "/files", opToken, "application/json", "{}", 415, ""},
		{"upload malformed multipart", "POST", model + "/files", opToken, "multipart/form-data; boundary=xyz", "--xyz\r\nbroken", 400, ""},
	}
	for _, c := range cases {
		code, body := e.do(c.method, c.path, c.token, c.ct, []byte(c.body))
		if code != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, code, trim(body), c.status)
			continue
		}
		if code >= 400 {
			p := problem(t, body)
			if p.Status != code || p.Detail == "" {
				t.Errorf("%s: problem %+v", c.name, p)
			}
			if c.field != "" && !hasField(p, c.field) {
				t.Errorf("%s: problems %+v lack field %s", c.name, p.Problems, c.field)
			}
		}
	}

	uploads := []struct {
		name, fileName string
		content        []byte
		fields         map[string]string
		status         int
		field          string
	}{
		{"no file", "-", nil, map[string]string{"file_kind": "model"}, 422, "file"},
		{"no kind", "m.onnx", []byte("x"), nil, 422, "file_kind"},
		{"bad kind", "m.onnx", []byte("x"), map[string]string{"file_kind": "weights"}, 422, "file_kind"},
		{"path traversal", "../../etc/passwd", []byte("x"), map[string]string{"file_kind": "data"}, 422, "file"},
		{"windows path", `..\..\boot.ini`, []byte("x"), map[string]string{"file_kind": "data"}, 422, "file"},
		{"absolute path", "/etc/passwd", []byte("x"), map[string]string{"file_kind": "data"}, 422, "file"},
		{"hidden file", ".env", []byte("x"), map[string]string{"file_kind": "env"}, 422, "file"},
		{"empty name", "", []byte("x"), map[string]string{"file_kind": "data"}, 422, "file"},
		{"empty file", "d.csv", nil, map[string]string{"file_kind": "data"}, 422, "file"},
		{"unknown part", "d.csv", []byte("x"), map[string]string{"file_kind": "data", "owner": "me"}, 422, "owner"},
		{"bad format", "m.bin", []byte("x"), map[string]string{"file_kind": "model", "format": "Not A Format"}, 422, "format"},
		{"unknown model format", "m.bin", []byte("x"), map[string]string{"file_kind": "model"}, 422, "format"},
		{"too large", "d.csv", bytes.Repeat([]byte("x"), 2<<20), map[string]string{"file_kind": "data"}, 413, ""},
	}
	for _, c := range uploads {
		code, body := e.upload(model+"/files", c.fileName, c.content, c.fields)
		if code != c.status {
			t.Errorf("upload %s: %d %s, want %d", c.name, code, trim(body), c.status)
			continue
		}
		if c.field != "" && !hasField(problem(t, body), c.field) {
			t.Errorf("upload %s: %s lacks field %s", c.name, trim(body), c.field)
		}
	}
	// Nothing was stored by the refused uploads.
	var files api.Page[api.Artifact]
	e.json(http.MethodGet, model+"/files", nil, &files, http.StatusOK)
	if len(files.Items) != 0 {
		t.Errorf("refused uploads stored %+v", files.Items)
	}
}

func hasField(p httpapi.Problem, f string) bool {
	for _, x := range p.Problems {
		if x.Field == f {
			return true
		}
	}
	return false
}

func trim(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
