package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
)

// contract is what every store must do; the folder store and the S3 store
// (against a real versitygw) run the same checks.
func contract(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("model"), 100_000)
	if err := s.Put(ctx, "models/m1/a1", bytes.NewReader(body), int64(len(body)), "application/octet-stream"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "models/m1/a2", strings.NewReader("x"), 1, "text/plain"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "models/m2/a3", strings.NewReader("yz"), 2, "text/plain"); err != nil {
		t.Fatal(err)
	}
	rc, info, err := s.Get(ctx, "models/m1/a1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, body) || info.Size != int64(len(body)) {
		t.Fatalf("get: %d bytes (info %d), %v", len(got), info.Size, err)
	}
	if st, err := s.Stat(ctx, "models/m2/a3"); err != nil || st.Size != 2 {
		t.Fatalf("stat: %+v, %v", st, err)
	}
	var keys []string
	if err := s.List(ctx, "models/m1/", func(i objstore.Info) error { keys = append(keys, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	if diff := cmp.Diff([]string{"models/m1/a1", "models/m1/a2"}, keys); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	if err := s.Delete(ctx, "models/m1/a1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "models/m1/a1"); err != nil { // idempotent
		t.Fatalf("second delete: %v", err)
	}
	if _, _, err := s.Get(ctx, "models/m1/a1"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, "models/none"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("stat of a missing key: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"../etc/passwd", "/abs", "a/../b", "a//b", ".hidden", "a/.."} {
		if err := s.Put(ctx, bad, strings.NewReader("x"), 1, ""); err == nil {
			t.Errorf("put %q accepted", bad)
		}
	}
}

func TestFS(t *testing.T) {
	s, err := objstore.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	contract(t, s)
}

func TestS3(t *testing.T) {
	srv := testbed.S3(t)
	s, err := objstore.NewS3(objstore.S3Config{Endpoint: srv.URL(), Bucket: "artifacts", AccessKey: srv.AccessKey(), SecretKey: srv.SecretKey()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureBucket(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	contract(t, s)

	// A stopped store is unavailable, not "not found".
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && srv.Running(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.Stat(ctx, "models/m2/a3"); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("stat with the store down: %v, want ErrUnavailable", err)
	}
	if err := s.Check(ctx); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("check with the store down: %v", err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stat(ctx, "models/m2/a3"); err != nil || st.Size != 2 {
		t.Fatalf("after a restart: %+v, %v", st, err)
	}

	bad, _ := objstore.NewS3(objstore.S3Config{Endpoint: srv.URL(), Bucket: "artifacts", AccessKey: srv.AccessKey(), SecretKey: "wrong"})
	if err := bad.Put(ctx, "models/x", strings.NewReader("x"), 1, ""); err == nil || errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("wrong secret: %v, want a plain error", err)
	}
}
