package registry_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/db"
	"github.com/mlsysops-go/mlsysops/mlconnector/internal/dbtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

func spec() api.ModelSpec {
	return api.ModelSpec{
		ModelName: "churn", ModelKind: "classification",
		Hyperparameter: []api.Hyperparameter{{Parameter: "learning_rate", Value: api.Scalar("0.1")}},
		FeatureList: []api.Feature{
			{FeatureName: "age", Type: api.FeatureContinuous, Kind: api.FeatureInput},
			{FeatureName: "plan", Type: api.FeatureCategorical, Kind: api.FeatureInput},
			{FeatureName: "churned", Type: api.FeatureCategorical, Kind: api.FeatureTarget},
		},
		DriftDetection: api.DriftList{{IsTrue: 1, Method: api.DriftKS}},
		ModelTags:      []string{"demo", "tabular"},
	}
}

func stores(t *testing.T) map[string]objstore.Store {
	fs, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := testbed.S3(t)
	s3, err := objstore.NewS3(objstore.S3Config{Endpoint: srv.URL(), Bucket: "artifacts", AccessKey: srv.AccessKey(), SecretKey: srv.SecretKey()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.EnsureBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	return map[string]objstore.Store{"filesystem": fs, "s3": s3}
}

func keys(t *testing.T, s objstore.Store) []string {
	t.Helper()
	var out []string
	if err := s.List(context.Background(), "", func(i objstore.Info) error { out = append(out, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func upload(t *testing.T, r *registry.Registry, model, kind, name, body string) api.Uploaded {
	t.Helper()
	u, err := r.Upload(context.Background(), registry.UploadRequest{
		ModelID: model, Kind: kind, FileName: name, ContentType: "application/octet-stream",
		Body: strings.NewReader(body), Size: int64(len(body)), By: "alice",
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRegistryLifecycle: register, upload versions and files, aliases,
// search, delete; on both stores, against a real PostgreSQL.
func TestRegistryLifecycle(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			r := registry.New(dbtest.Pool(t), store, registry.Options{Logger: dbtest.Logger(t)})
			m, err := r.CreateModel(ctx, spec(), "alice")
			if err != nil {
				t.Fatal(err)
			}
			if m.LatestVersion != 0 || m.Owner != "alice" || m.FeatureList[1].FeatureName != "plan" {
				t.Fatalf("created %+v", m)
			}
			if string(m.Hyperparameter[0].Value) != "0.1" {
				t.Errorf("hyperparameter value %s, want 0.1", m.Hyperparameter[0].Value)
			}

			v1 := upload(t, r, m.ModelID, api.FileModel, "model.onnx", "onnx-bytes-1")
			sum := sha256.Sum256([]byte("onnx-bytes-1"))
			if v1.Version == nil || v1.Version.Version != 1 || v1.Version.Format != "onnx" || v1.SHA256 != hex.EncodeToString(sum[:]) || v1.Size != 12 {
				t.Fatalf("first upload %+v", v1)
			}
			data := upload(t, r, m.ModelID, api.FileData, "train.csv", "age,plan\n1,a\n")
			if data.Version != nil || data.Revision != 1 {
				t.Fatalf("data upload %+v", data)
			}
			v2 := upload(t, r, m.ModelID, api.FileModel, "model-v2.onnx", "onnx-bytes-2")
			if v2.Version.Version != 2 {
				t.Fatalf("second model upload is version %d", v2.Version.Version)
			}
			if err := r.SetAlias(ctx, m.ModelID, "production", 1); err != nil {
				t.Fatal(err)
			}
			if err := r.SetAlias(ctx, m.ModelID, "production", 9); !errors.Is(err, registry.ErrNotFound) {
				t.Fatalf("alias to a missing version: %v", err)
			}
			for ref, want := range map[string]int{"": 2, "latest": 2, "1": 1, "production": 1} {
				v, err := r.Resolve(ctx, m.ModelID, ref)
				if err != nil || v.Version != want {
					t.Errorf("resolve %q = %d, %v; want %d", ref, v.Version, err, want)
				}
			}
			got, err := r.Model(ctx, m.ModelID)
			if err != nil {
				t.Fatal(err)
			}
			if got.LatestVersion != 2 || got.Format != "onnx" || !cmp.Equal(got.Aliases, map[string]int{"production": 1}) {
				t.Errorf("model after uploads: latest %d format %q aliases %v", got.LatestVersion, got.Format, got.Aliases)
			}
			vs, err := r.Versions(ctx, m.ModelID)
			if err != nil || len(vs) != 2 || vs[1].Aliases[0] != "production" {
				t.Fatalf("versions %+v, %v", vs, err)
			}
			rc, a, err := r.Open(ctx, m.ModelID, data.ID)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != "age,plan\n1,a\n" || a.FileName != "train.csv" {
				t.Errorf("opened %q (%s)", b, a.FileName)
			}

			// Search by kind and tags.
			other := spec()
			other.ModelKind, other.ModelTags = "regression", []string{"other"}
			if _, err := r.CreateModel(ctx, other, "bob"); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				o    registry.ListOptions
				want int
			}{
				{registry.ListOptions{}, 2},
				{registry.ListOptions{Kind: "classification"}, 1},
				{registry.ListOptions{Tags: []string{"tabular", "nope"}}, 1},
				{registry.ListOptions{Tags: []string{"nope"}}, 0},
			} {
				list, _, err := r.Models(ctx, c.o)
				if err != nil || len(list) != c.want {
					t.Errorf("list %+v: %d models, %v; want %d", c.o, len(list), err, c.want)
				}
			}

			// Replace the description with a stale read: conflict.
			changed := got.ModelSpec
			changed.ModelName = "churn-2"
			if _, err := r.ReplaceSpec(ctx, m.ModelID, changed, got.UpdatedAt); err != nil {
				t.Fatal(err)
			}
			var ce *registry.ConflictError
			if _, err := r.ReplaceSpec(ctx, m.ModelID, changed, got.UpdatedAt); !errors.As(err, &ce) {
				t.Fatalf("stale replace: %v", err)
			}

			if n := len(keys(t, store)); n != 3 {
				t.Fatalf("%d objects in the store, want 3", n)
			}
			if err := r.DeleteModel(ctx, m.ModelID); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Model(ctx, m.ModelID); !errors.Is(err, registry.ErrNotFound) {
				t.Fatalf("model after delete: %v", err)
			}
			if left := keys(t, store); len(left) != 0 {
				t.Fatalf("objects left after deleting the model: %v", left)
			}
			var queued int
			if err := r.Pool().QueryRow(ctx, `SELECT count(*) FROM object_deletions`).Scan(&queued); err != nil || queued != 0 {
				t.Fatalf("queued deletions %d, %v", queued, err)
			}
			if err := r.DeleteModel(ctx, m.ModelID); !errors.Is(err, registry.ErrNotFound) {
				t.Fatalf("second delete: %v", err)
			}
		})
	}
}

func TestUploadFormat(t *testing.T) {
	ctx := context.Background()
	store, _ := objstore.NewFS(t.TempDir())
	r := registry.New(dbtest.Pool(t), store, registry.Options{})
	m, err := r.CreateModel(ctx, spec(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Upload(ctx, registry.UploadRequest{ModelID: m.ModelID, Kind: api.FileModel, FileName: "model.bin", Body: strings.NewReader("??"), Size: 2})
	var fe *registry.FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("unknown format: %v", err)
	}
	if left := keys(t, store); len(left) != 0 {
		t.Fatalf("a refused upload left %v", left)
	}
	u, err := r.Upload(ctx, registry.UploadRequest{ModelID: m.ModelID, Kind: api.FileModel, FileName: "model.txt",
		Body: strings.NewReader("tree\nversion=v4\n"), Size: 16})
	if err != nil || u.Version.Format != "lightgbm" {
		t.Fatalf("lightgbm text model: %+v, %v", u.Version, err)
	}
	// A short body is refused and leaves nothing.
	_, err = r.Upload(ctx, registry.UploadRequest{ModelID: m.ModelID, Kind: api.FileData, FileName: "d.csv", Body: strings.NewReader("abc"), Size: 10})
	if err == nil {
		t.Fatal("a body shorter than its size was accepted")
	}
	if left := keys(t, store); len(left) != 1 {
		t.Fatalf("objects %v, want only the model", left)
	}
}

// TestConcurrentUploads: versions are numbered without gaps or duplicates.
func TestConcurrentUploads(t *testing.T) {
	ctx := context.Background()
	store, _ := objstore.NewFS(t.TempDir())
	r := registry.New(dbtest.Pool(t), store, registry.Options{})
	m, err := r.CreateModel(ctx, spec(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Upload(ctx, registry.UploadRequest{ModelID: m.ModelID, Kind: api.FileModel, FileName: "m.onnx", Body: strings.NewReader("x"), Size: 1})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	vs, err := r.Versions(ctx, m.ModelID)
	if err != nil {
		t.Fatal(err)
	}
	var nums []int
	for _, v := range vs {
		nums = append(nums, v.Version)
	}
	sort.Ints(nums)
	if diff := cmp.Diff([]int{1, 2, 3, 4, 5, 6, 7, 8}, nums); diff != "" {
		t.Fatalf("versions (-want +got):\n%s", diff)
	}
}

// TestPostgresRestart: the database crashes and comes back; requests in
// between are refused as unavailable (never a wrong answer), later ones
// work, nothing committed is lost.
func TestPostgresRestart(t *testing.T) {
	ctx := context.Background()
	pg := testbed.Postgres(t)
	if err := pg.EnsureDatabase(ctx, "mlc", "mlc", "pw-0123456789"); err != nil {
		t.Fatal(err)
	}
	pool := dbtest.Open(t, pg.DSN("mlc", "pw-0123456789", "mlc"))
	store, _ := objstore.NewFS(t.TempDir())
	r := registry.New(pool, store, registry.Options{RetryWait: 2 * time.Second, Logger: dbtest.Logger(t)})
	m, err := r.CreateModel(ctx, spec(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	upload(t, r, m.ModelID, api.FileModel, "m.onnx", "v1")
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && pg.Running(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := r.Model(ctx, m.ModelID); !db.IsUnavailable(err) || !errors.Is(err, db.ErrUnavailable) {
		t.Fatalf("read with the database down: %v, want ErrUnavailable", err)
	}
	_, err = r.Upload(ctx, registry.UploadRequest{ModelID: m.ModelID, Kind: api.FileModel, FileName: "m.onnx", Body: strings.NewReader("v2"), Size: 2})
	if !errors.Is(err, db.ErrUnavailable) {
		t.Fatalf("upload with the database down: %v, want ErrUnavailable", err)
	}
	// Restart while a read is retrying: it succeeds.
	done := make(chan error, 1)
	go func() {
		rr := registry.New(pool, store, registry.Options{RetryWait: 60 * time.Second})
		got, err := rr.Model(ctx, m.ModelID)
		if err == nil && got.LatestVersion != 1 {
			err = errors.New("wrong latest version after the restart")
		}
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("read retried across the restart: %v", err)
	}
	u := upload(t, r, m.ModelID, api.FileModel, "m.onnx", "v2")
	if u.Version.Version != 2 {
		t.Fatalf("after the restart the next version is %d, want 2", u.Version.Version)
	}
	if left := keys(t, store); len(left) != 2 {
		t.Fatalf("objects %v: want the two versions (the refused upload's object removed)", left)
	}
}

// TestObjectStoreDown: deleting a model while the store is down forgets
// the model at once and removes its objects when the store is back.
func TestObjectStoreDown(t *testing.T) {
	ctx := context.Background()
	srv := testbed.S3(t)
	store, err := objstore.NewS3(objstore.S3Config{Endpoint: srv.URL(), Bucket: "artifacts", AccessKey: srv.AccessKey(), SecretKey: srv.SecretKey()})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	r := registry.New(dbtest.Pool(t), store, registry.Options{Logger: dbtest.Logger(t)})
	m, err := r.CreateModel(ctx, spec(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	upload(t, r, m.ModelID, api.FileModel, "m.onnx", "v1")
	upload(t, r, m.ModelID, api.FileData, "d.csv", "a,b\n")
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = r.Upload(ctx, registry.UploadRequest{ModelID: m.ModelID, Kind: api.FileModel, FileName: "m.onnx", Body: bytes.NewReader([]byte("v2")), Size: 2})
	if !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("upload with the store down: %v, want ErrUnavailable", err)
	}
	if err := r.DeleteModel(ctx, m.ModelID); err != nil {
		t.Fatalf("delete with the store down: %v", err)
	}
	var queued int
	if err := r.Pool().QueryRow(ctx, `SELECT count(*) FROM object_deletions`).Scan(&queued); err != nil || queued != 2 {
		t.Fatalf("queued deletions %d, %v; want 2", queued, err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := r.SweepDeletions(ctx, nil); err != nil || n != 2 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if left := keys(t, store); len(left) != 0 {
		t.Fatalf("objects left: %v", left)
	}

	// An object no row knows (an upload cut short) is collected.
	if err := store.Put(ctx, "models/"+m.ModelID+"/stray", strings.NewReader("x"), 1, ""); err != nil {
		t.Fatal(err)
	}
	if n, err := r.CollectOrphans(ctx, 0); err != nil || n != 1 {
		t.Fatalf("collect orphans: %d, %v", n, err)
	}
}
