package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/handlers"
	"github.com/mlsysops-go/mlsysops/mlconnector/internal/dbtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

// TestDependenciesRestart: PostgreSQL and the S3 server go down and come
// back under the API. Meanwhile requests are refused with 503, a
// Retry-After and a detail naming what is down, /readyz says which; after,
// everything works and nothing acknowledged before is lost.
func TestDependenciesRestart(t *testing.T) {
	ctx := context.Background()
	pg := testbed.Postgres(t)
	if err := pg.EnsureDatabase(ctx, "mlc", "mlc", "pw-0123456789"); err != nil {
		t.Fatal(err)
	}
	pool := dbtest.Open(t, pg.DSN("mlc", "pw-0123456789", "mlc"))
	s3srv := testbed.S3(t)
	store, err := objstore.NewS3(objstore.S3Config{Endpoint: s3srv.URL(), Bucket: "artifacts", AccessKey: s3srv.AccessKey(), SecretKey: s3srv.SecretKey()})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	reg := registry.New(pool, store, registry.Options{RetryWait: time.Second, Logger: dbtest.Logger(t)})
	a, err := handlers.New(handlers.Config{Registry: reg, Logger: dbtest.Logger(t), UploadDir: t.TempDir(),
		Auth: auth.Static([]auth.Entry{{Token: opToken, Identity: auth.Identity{Name: "alice", Role: auth.RoleOperator}}})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	e := &env{t: t, api: a, srv: srv, store: store, reg: reg}

	var m api.Model
	e.json(http.MethodPost, "/v1/models", modelBody(), &m, http.StatusCreated)
	if code, body := e.upload("/v1/models/"+m.ModelID+"/files", "m.onnx", []byte("v1"), map[string]string{"file_kind": "model"}); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, body)
	}

	// The object store goes down: uploads and downloads are 503, the
	// registry's reads still work.
	if err := s3srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	code, body := e.upload("/v1/models/"+m.ModelID+"/files", "m.onnx", []byte("v2"), map[string]string{"file_kind": "model"})
	if p := problem(t, body); code != http.StatusServiceUnavailable || p.Detail != "the artifact store is unavailable; retry later" {
		t.Errorf("upload with the store down: %d %s", code, body)
	}
	if code, body := e.do(http.MethodGet, "/readyz", "", "", nil); code != http.StatusServiceUnavailable || !contains(string(body), "artifact_store") {
		t.Errorf("readyz with the store down: %d %s", code, body)
	}
	e.json(http.MethodGet, "/v1/models/"+m.ModelID, nil, nil, http.StatusOK)
	if err := s3srv.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// The database crashes: every request is 503 with Retry-After.
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && pg.Running(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/models/"+m.ModelID, nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("read with the database down: %s, Retry-After %q", resp.Status, resp.Header.Get("Retry-After"))
	}
	code, body = e.do(http.MethodPost, "/v1/models", opToken, "application/json", []byte(modelBody()))
	if p := problem(t, body); code != http.StatusServiceUnavailable || p.Detail != "the database is unavailable; retry later" {
		t.Errorf("create with the database down: %d %s", code, body)
	}
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Back: what was acknowledged is there, and work goes on.
	var got api.Model
	e.json(http.MethodGet, "/v1/models/"+m.ModelID, nil, &got, http.StatusOK)
	if got.LatestVersion != 1 {
		t.Errorf("after the restarts the model has version %d, want 1", got.LatestVersion)
	}
	code, body = e.upload("/v1/models/"+m.ModelID+"/files", "m.onnx", []byte("v2"), map[string]string{"file_kind": "model"})
	var up api.Uploaded
	_ = json.Unmarshal(body, &up)
	if code != http.StatusCreated || up.Version == nil || up.Version.Version != 2 {
		t.Errorf("upload after the restarts: %d %s", code, body)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
