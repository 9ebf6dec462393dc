package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
)

// TestModelLifecycle goes through the registry routes, versioned and
// upstream, as a user would.
func TestModelLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	var m api.Model
	e.json(http.MethodPost, "/model/add", modelBody(), &m, http.StatusCreated)
	if m.ModelID == "" || m.ModelName != "iris" || len(m.FeatureList) != 5 || m.Owner != "alice" {
		t.Fatalf("created %+v", m)
	}
	if on, method := m.DriftDetection.Enabled(); !on || method != api.DriftKS {
		t.Errorf("drift detection %+v", m.DriftDetection)
	}
	// Upstream's Hyperparameter values were ints; strings pass too.
	if string(m.Hyperparameter[1].Value) != `"multiclass"` {
		t.Errorf("hyperparameter value %s", m.Hyperparameter[1].Value)
	}

	onnx := []byte("\x08\x07onnx-model-bytes")
	code, body := e.upload("/model/"+m.ModelID+"/upload", "iris.onnx", onnx, map[string]string{"file_kind": "model"})
	if code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, body)
	}
	var up api.Uploaded
	_ = json.Unmarshal(body, &up)
	sum := sha256.Sum256(onnx)
	if up.SHA256 != hex.EncodeToString(sum[:]) || up.Kind != "model" || up.FileName != "iris.onnx" || up.Version == nil || up.Version.Version != 1 {
		t.Fatalf("uploaded %+v", up)
	}
	// Upstream's FileSchema keys are there.
	for _, k := range []string{`"modelid"`, `"filekind"`, `"filename"`, `"contenttype"`} {
		if !strings.Contains(string(body), k) {
			t.Errorf("upload answer lacks %s: %s", k, body)
		}
	}
	code, body = e.upload("/v1/models/"+m.ModelID+"/files", "train.csv", []byte("a,b\n1,2\n"), map[string]string{"file_kind": "data"})
	if code != http.StatusCreated {
		t.Fatalf("data upload: %d %s", code, body)
	}
	code, _ = e.upload("/v1/models/"+m.ModelID+"/files", "iris-v2.onnx", []byte("v2"), map[string]string{"file_kind": "model", "format": "onnx"})
	if code != http.StatusCreated {
		t.Fatalf("second version: %d", code)
	}

	var got api.Model
	e.json(http.MethodGet, "/v1/models/"+m.ModelID, nil, &got, http.StatusOK)
	if got.LatestVersion != 2 || got.Format != "onnx" {
		t.Errorf("model after uploads: latest %d format %q", got.LatestVersion, got.Format)
	}

	// Download by a viewer.
	code, content := e.do(http.MethodGet, "/v1/models/"+m.ModelID+"/files/"+up.ID+"/content", viewerToken, "", nil)
	if code != http.StatusOK || string(content) != string(onnx) {
		t.Fatalf("download: %d %q", code, content)
	}

	// A file lost from the store is missing (404), not a server error.
	var lost []string
	if err := e.store.List(context.Background(), "models/"+m.ModelID+"/", func(i objstore.Info) error { lost = append(lost, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, k := range lost {
		if strings.Contains(k, up.ID) {
			if err := e.store.Delete(context.Background(), k); err != nil {
				t.Fatal(err)
			}
		}
	}
	if code, body := e.do(http.MethodGet, "/v1/models/"+m.ModelID+"/files/"+up.ID+"/content", viewerToken, "", nil); code != http.StatusNotFound || !strings.Contains(string(body), "missing from the artifact store") {
		t.Errorf("download of a lost file: %d %s", code, body)
	}

	// Aliases.
	var v api.Version
	e.json(http.MethodPut, "/v1/models/"+m.ModelID+"/aliases/production", `{"version": 1}`, &v, http.StatusOK)
	if v.Version != 1 || !cmp.Equal(v.Aliases, []string{"production"}) {
		t.Fatalf("alias: %+v", v)
	}
	e.json(http.MethodGet, "/v1/models/"+m.ModelID+"/versions/production", nil, &v, http.StatusOK)
	e.json(http.MethodGet, "/v1/models/"+m.ModelID+"/versions/latest", nil, &v, http.StatusOK)
	if v.Version != 2 {
		t.Errorf("latest is %d", v.Version)
	}
	var vs api.Page[api.Version]
	e.json(http.MethodGet, "/v1/models/"+m.ModelID+"/versions", nil, &vs, http.StatusOK)
	if len(vs.Items) != 2 {
		t.Errorf("%d versions", len(vs.Items))
	}
	e.json(http.MethodDelete, "/v1/models/"+m.ModelID+"/aliases/production", nil, nil, http.StatusNoContent)
	e.json(http.MethodDelete, "/v1/models/"+m.ModelID+"/aliases/production", nil, nil, http.StatusNotFound)

	// Merge patch: the name changes, a tag list is replaced, the rest stays.
	var patched api.Model
	e.json(http.MethodPatch, "/model/"+m.ModelID, `{"modelname": "iris-v2", "modeltags": ["prod"]}`, &patched, http.StatusOK)
	if patched.ModelName != "iris-v2" || !cmp.Equal(patched.ModelTags, []string{"prod"}) || len(patched.FeatureList) != 5 {
		t.Fatalf("patched %+v", patched)
	}

	// Upstream lists: arrays; kind and tags.
	var other api.Model
	e.json(http.MethodPost, "/v1/models", `{"modelname": "house", "modelkind": "regression", "drift_detection": null, "modeltags": ["demo"]}`, &other, http.StatusCreated)
	for path, want := range map[string]int{
		"/model/all": 2, "/model/all?skip=1": 1, "/model/all?limit=1": 1, "/model/getkind/regression": 1,
		"/model/getkind/none": 0, "/model/search?tags=prod&tags=demo": 2, "/model/search?tags=prod": 1,
	} {
		var list []api.Model
		e.json(http.MethodGet, path, nil, &list, http.StatusOK)
		if len(list) != want {
			t.Errorf("%s: %d models, want %d", path, len(list), want)
		}
	}
	var page api.Page[api.Model]
	e.json(http.MethodGet, "/v1/models?limit=1", nil, &page, http.StatusOK)
	if len(page.Items) != 1 || page.Continue == "" {
		t.Fatalf("first page %+v", page)
	}
	var page2 api.Page[api.Model]
	e.json(http.MethodGet, "/v1/models?limit=1&continue="+page.Continue, nil, &page2, http.StatusOK)
	if len(page2.Items) != 1 || page2.Items[0].ModelID == page.Items[0].ModelID || page2.Continue != "" {
		t.Fatalf("second page %+v", page2)
	}

	// Delete: the files go with the model.
	var msg api.Message
	e.json(http.MethodDelete, "/model/"+m.ModelID, nil, &msg, http.StatusOK)
	e.json(http.MethodGet, "/v1/models/"+m.ModelID, nil, nil, http.StatusNotFound)
	var left []string
	_ = e.store.List(t.Context(), "", func(i objstore.Info) error { left = append(left, i.Key); return nil })
	if len(left) != 0 {
		t.Fatalf("objects left: %v", left)
	}
}
