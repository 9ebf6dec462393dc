package handlers_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/internal/httpapi/apitest"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/handlers"
	"github.com/mlsysops-go/mlsysops/mlconnector/internal/dbtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

const (
	opToken     = "operator-token-0123456789"
	viewerToken = "viewer-token-0123456789"
)

// env is a connector API on a fresh database and a folder store.
type env struct {
	t     testing.TB
	api   *handlers.API
	srv   *httptest.Server
	store objstore.Store
	reg   *registry.Registry
}

func newEnv(t testing.TB, mod func(*handlers.Config)) *env {
	t.Helper()
	store, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := dbtest.Logger(t)
	if _, fuzz := t.(*testing.F); fuzz {
		// A fuzz target's server must not log to the F.
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg := registry.New(dbtest.Pool(t), store, registry.Options{Logger: log})
	cfg := handlers.Config{
		Registry: reg,
		Auth: auth.Static([]auth.Entry{
			{Token: opToken, Identity: auth.Identity{Name: "alice", Role: auth.RoleOperator}},
			{Token: viewerToken, Identity: auth.Identity{Name: "bob", Role: auth.RoleViewer}},
		}),
		MaxUploadBytes: 1 << 20, UploadDir: t.TempDir(), Logger: log,
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := handlers.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &env{t: t, api: a, srv: srv, store: store, reg: reg}
}

// do sends a request with a token ("" for none) and returns the status and
// body.
func (e *env) do(method, path, token, contentType string, body []byte) (int, []byte) {
	e.t.Helper()
	return e.request(e.t, method, path, token, contentType, body)
}

// request is do for another test than the env's (a fuzz target's).
func (e *env) request(t testing.TB, method, path, token, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (e *env) json(method, path string, body any, out any, want int) {
	e.t.Helper()
	var b []byte
	if body != nil {
		switch v := body.(type) {
		case string:
			b = []byte(v)
		default:
			b, _ = json.Marshal(v)
		}
	}
	code, resp := e.do(method, path, opToken, "application/json", b)
	if code != want {
		e.t.Fatalf("%s %s: %d %s, want %d", method, path, code, resp, want)
	}
	if out != nil {
		if err := json.Unmarshal(resp, out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, resp)
		}
	}
}

// upload sends a multipart upload with the given parts; file is sent as
// the part "file" named fileName unless fileName is "-".
func (e *env) upload(path, fileName string, content []byte, fields map[string]string) (int, []byte) {
	e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	if fileName != "-" {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="`+fileName+`"`)
		h.Set("Content-Type", "application/octet-stream")
		w, _ := mw.CreatePart(h)
		_, _ = w.Write(content)
	}
	mw.Close()
	return e.do(http.MethodPost, path, opToken, mw.FormDataContentType(), buf.Bytes())
}

func problem(t *testing.T, b []byte) httpapi.Problem {
	t.Helper()
	var p httpapi.Problem
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("not a problem document: %s", b)
	}
	return p
}

func modelBody() string {
	return `{"modelname": "iris", "modelkind": "classification",
	  "hyperparameter": [{"parameter": "n_estimators", "value": 100}, {"parameter": "objective", "value": "multiclass"}],
	  "modelperformance": [{"metric": "accuracy", "order": 1, "threshold": 0.9}],
	  "trainingresource": [{"resource_name": "cpu", "value": 4, "deploy": 1}],
	  "runresource": [{"resource_name": "cpu", "value": 1}],
	  "featurelist": [
	    {"feature_name": "sepal_length", "type": "cont", "kind": 0, "units": "cm"},
	    {"feature_name": "sepal_width", "type": "cont", "kind": 0},
	    {"feature_name": "petal_length", "type": "cont", "kind": 0},
	    {"feature_name": "petal_width", "type": "cont", "kind": 0},
	    {"feature_name": "species", "type": "cat", "kind": 1}],
	  "inference": [{"type": "latency_ms", "value": 50}],
	  "drift_detection": [{"is_true": 1, "method": 2}],
	  "modeltags": ["iris", "demo"]}`
}

func TestOpenAPIMatchesRoutes(t *testing.T) { apitest.MatchesRoutes(t, newEnv(t, nil).api.Server()) }

func TestOpenAPIConsistent(t *testing.T) { apitest.Consistent(t, newEnv(t, nil).api.Server()) }

func TestDocsPage(t *testing.T) { apitest.DocsPage(t, newEnv(t, nil).api.Server()) }

func TestOpenAPISchemasMatchTypes(t *testing.T) {
	apitest.SchemasMatchTypes(t, newEnv(t, nil).api.Server(), map[string]any{
		"Artifact": api.Artifact{}, "Version": api.Version{}, "Runtime": api.Runtime{}, "Placement": api.Placement{},
		"GPU": api.GPU{}, "Resources": api.Resources{}, "DeploymentSpec": api.DeploymentSpec{}, "Endpoint": api.Endpoint{},
		"Serving": api.Serving{}, "Pod": api.Pod{}, "OperationCreate": api.OperationCreate{}, "Operation": api.Operation{},
		"DriftResult": api.DriftResult{}, "DriftRun": api.DriftRun{}, "Explanation": api.Explanation{},
		"ExplainRequest": api.ExplainRequest{}, "PredictRequest": api.PredictRequest{}, "Prediction": api.Prediction{},
		"Feature": api.Feature{}, "Hyperparameter": api.Hyperparameter{}, "DriftDetection": api.DriftDetection{},
		"UpstreamStatus": api.UpstreamStatus{}, "AliasRequest": api.AliasRequest{},
	})
}
