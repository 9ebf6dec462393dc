package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// s3Server is a versitygw (built by `make deps`) on a free loopback port,
// private to the test, with a bucket "models".
type s3Server struct {
	cfg    S3Config
	client *minio.Client
}

func startS3(t *testing.T) *s3Server {
	t.Helper()
	bin := os.Getenv("MLSYSOPS_VERSITYGW")
	if bin == "" {
		bin = filepath.Join(servingtest.Dir(), "..", "..", "..", "bin", "versitygw")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("versitygw not found at %s: run `make deps`", bin)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	for _, d := range []string{"data", "meta"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s := &s3Server{cfg: S3Config{Endpoint: "http://" + addr, AccessKey: "fetch-test", SecretKey: "fetch-test-secret-0123456789"}}
	cmd := exec.Command(bin, "--port", addr, "posix", "--sidecar", filepath.Join(dir, "meta"), filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.cfg.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.cfg.SecretKey, "VGW_HEALTH=/health", "VGW_QUIET=true")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw not healthy after 30s: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.client, err = minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(s.cfg.AccessKey, s.cfg.SecretKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.client.MakeBucket(context.Background(), "models", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *s3Server) put(t *testing.T, key string, b []byte) {
	t.Helper()
	if _, err := s.client.PutObject(context.Background(), "models", key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

func fixture(t *testing.T, name string) []byte {
	b, err := os.ReadFile(servingtest.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func kindOf(err error) Kind {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Kind
	}
	return ""
}

func TestFetchFromS3(t *testing.T) {
	s3 := startS3(t)
	model, train := fixture(t, "iris_mlp.onnx"), fixture(t, "iris.train.csv")
	s3.put(t, "iris/1/model.onnx", model)
	s3.put(t, "iris/1/train.csv", train)
	corrupt := append([]byte(nil), model...)
	corrupt[len(corrupt)/2] ^= 0xff
	s3.put(t, "iris/2/model.onnx", corrupt)

	good := Manifest{Artifacts: []Artifact{
		{Name: "model.onnx", URI: "s3://models/iris/1/model.onnx", SHA256: sum(model), Size: int64(len(model))},
		{Name: "data/train.csv", URI: "s3://models/iris/1/train.csv", SHA256: sum(train)},
	}}
	cases := map[string]struct {
		manifest Manifest
		s3       S3Config
		want     Kind
		message  string
	}{
		"verified": {manifest: good, s3: s3.cfg},
		"corrupt object": {manifest: Manifest{Artifacts: []Artifact{
			{Name: "model.onnx", URI: "s3://models/iris/2/model.onnx", SHA256: sum(model)}}},
			s3: s3.cfg, want: ChecksumMismatch, message: "checksum mismatch: model.onnx (s3://models/iris/2/model.onnx): sha256 " + sum(corrupt)},
		"missing object": {manifest: Manifest{Artifacts: []Artifact{
			{Name: "model.onnx", URI: "s3://models/iris/9/model.onnx", SHA256: sum(model)}}},
			s3: s3.cfg, want: Missing, message: "artifact missing: model.onnx"},
		"missing bucket": {manifest: Manifest{Artifacts: []Artifact{
			{Name: "model.onnx", URI: "s3://nobucket/model.onnx", SHA256: sum(model)}}},
			s3: s3.cfg, want: Missing, message: "NoSuchBucket"},
		"wrong secret": {manifest: good,
			s3:   S3Config{Endpoint: s3.cfg.Endpoint, AccessKey: s3.cfg.AccessKey, SecretKey: "wrong-secret-0123456789"},
			want: DownloadFailed, message: "S3 refused the credentials"},
		"no endpoint": {manifest: good, want: DownloadFailed, message: "MLS_S3_ENDPOINT"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			err := New(Options{S3: tc.s3, Attempts: 1}).Fetch(context.Background(), &tc.manifest, dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range tc.manifest.Artifacts {
					b, err := os.ReadFile(filepath.Join(dir, a.Name))
					if err != nil || sum(b) != a.SHA256 {
						t.Errorf("%s: %v, checksum %s", a.Name, err, sum(b))
					}
				}
				return
			}
			if kindOf(err) != tc.want || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q, want kind %q containing %q", err, tc.want, tc.message)
			}
			if strings.Contains(err.Error(), s3.cfg.SecretKey) {
				t.Errorf("the error shows the secret: %v", err)
			}
			assertNoFiles(t, dir, "model.onnx")
		})
	}
}

// assertNoFiles checks that a failed fetch left neither the file nor its
// temporary copy.
func assertNoFiles(t *testing.T, dir, name string) {
	t.Helper()
	for _, n := range []string{name, tempName(name)} {
		if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind (%v)", n, err)
		}
	}
}

func TestFetchFromLocalPathAndHTTPS(t *testing.T) {
	model := fixture(t, "iris_gbm.txt")
	src := filepath.Join(t.TempDir(), "model.txt")
	if err := os.WriteFile(src, model, 0o600); err != nil {
		t.Fatal(err)
	}
	var hits int
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		switch r.URL.Path {
		case "/model.txt":
			_, _ = w.Write(model)
		case "/flaky.txt":
			if hits%2 == 1 {
				http.Error(w, "try later", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write(model)
		case "/secret.txt":
			http.Error(w, "no", http.StatusForbidden)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writeCA(t, srv, caFile)

	cases := map[string]struct {
		a       Artifact
		want    Kind
		message string
	}{
		"absolute path":   {a: Artifact{URI: src, SHA256: sum(model)}},
		"file URI":        {a: Artifact{URI: "file://" + src, SHA256: sum(model)}},
		"https":           {a: Artifact{URI: srv.URL + "/model.txt?X-Amz-Signature=abc", SHA256: sum(model)}},
		"https retried":   {a: Artifact{URI: srv.URL + "/flaky.txt", SHA256: sum(model)}},
		"missing file":    {a: Artifact{URI: src + ".absent", SHA256: sum(model)}, want: Missing, message: "does not exist"},
		"missing https":   {a: Artifact{URI: srv.URL + "/absent.txt?X-Amz-Signature=abc", SHA256: sum(model)}, want: Missing, message: "HTTP 404"},
		"forbidden https": {a: Artifact{URI: srv.URL + "/secret.txt", SHA256: sum(model)}, want: DownloadFailed, message: "HTTP 403"},
		"wrong checksum":  {a: Artifact{URI: src, SHA256: sum([]byte("other"))}, want: ChecksumMismatch, message: "want " + sum([]byte("other"))},
		"wrong size":      {a: Artifact{URI: src, SHA256: sum(model), Size: 10}, want: ChecksumMismatch, message: "more than 10 bytes"},
		"directory":       {a: Artifact{URI: filepath.Dir(src), SHA256: sum(model)}, want: InvalidManifest, message: "is a directory"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tc.a.Name = "model.txt"
			f := New(Options{HTTP: HTTPConfig{CAFile: caFile}, Attempts: 2, Backoff: time.Millisecond})
			err := f.Fetch(context.Background(), &Manifest{Artifacts: []Artifact{tc.a}}, dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := os.ReadFile(filepath.Join(dir, "model.txt")); sum(b) != sum(model) {
					t.Error("wrong content")
				}
				return
			}
			if kindOf(err) != tc.want || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q, want kind %q containing %q", err, tc.want, tc.message)
			}
			if strings.Contains(err.Error(), "Signature") {
				t.Errorf("the error shows the URL's query: %v", err)
			}
			assertNoFiles(t, dir, "model.txt")
		})
	}
}

func writeCA(t *testing.T, srv *httptest.Server, path string) {
	t.Helper()
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestResumeKeepsVerifiedFiles(t *testing.T) {
	model := fixture(t, "iris_gbm.txt")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model.txt"), model, 0o600); err != nil {
		t.Fatal(err)
	}
	// The URI does not exist: a file already present with the right
	// checksum is not fetched again.
	m := &Manifest{Artifacts: []Artifact{{Name: "model.txt", URI: "/nonexistent/model.txt", SHA256: sum(model)}}}
	if err := New(Options{}).Fetch(context.Background(), m, dir); err != nil {
		t.Fatal(err)
	}
	// A present file with another checksum is replaced, or here, since
	// the source is missing, the fetch fails.
	m.Artifacts[0].SHA256 = sum([]byte("other"))
	if err := New(Options{}).Fetch(context.Background(), m, dir); kindOf(err) != Missing {
		t.Fatalf("error %v, want artifact missing", err)
	}
}

func TestManifestValidation(t *testing.T) {
	ok := sum(nil)
	cases := map[string]struct {
		manifest string
		want     []string
	}{
		"not JSON":      {`{"artifacts": [`, []string{"not a JSON manifest"}},
		"unknown field": {`{"artifacts": [], "extra": 1}`, []string{"unknown field"}},
		"empty":         {`{"artifacts": []}`, []string{"none listed"}},
		"hostile names": {`{"artifacts": [
			{"name": "../etc/passwd", "uri": "/a", "sha256": "` + ok + `"},
			{"name": "/etc/passwd", "uri": "/a", "sha256": "` + ok + `"},
			{"name": "a/../../b", "uri": "/a", "sha256": "` + ok + `"},
			{"name": ".hidden", "uri": "/a", "sha256": "` + ok + `"},
			{"name": "a\\b", "uri": "/a", "sha256": "` + ok + `"},
			{"name": "", "uri": "/a", "sha256": "` + ok + `"}]}`,
			[]string{"artifacts[0].name", "artifacts[1].name", "artifacts[2].name", "artifacts[3].name", "artifacts[4].name", "artifacts[5].name: empty"}},
		"bad URIs and sums": {`{"artifacts": [
			{"name": "a", "uri": "ftp://host/a", "sha256": "` + ok + `"},
			{"name": "b", "uri": "s3://bucket", "sha256": "xyz"},
			{"name": "a", "uri": "relative/path", "sha256": "` + ok[:10] + `", "size": -1}]}`,
			[]string{"artifacts[0].uri", "artifacts[1].uri", "artifacts[1].sha256", "artifacts[2].name: \"a\" appears twice", "artifacts[2].uri", "artifacts[2].sha256", "artifacts[2].size"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseManifest([]byte(tc.manifest))
			if kindOf(err) != InvalidManifest {
				t.Fatalf("error %v, want invalid manifest", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := ParseManifest([]byte(`{"artifacts": [{"name": "sub/dir/model.onnx", "uri": "s3://b/k", "sha256": "` + strings.ToUpper(ok) + `"}]}`)); err != nil {
		t.Errorf("valid manifest: %v", err)
	}
}

// TestSymlinkInDestinationIsRefused: a directory of the destination that
// is a link leaving it is not followed.
func TestSymlinkInDestinationIsRefused(t *testing.T) {
	model := fixture(t, "iris_gbm.txt")
	src := filepath.Join(t.TempDir(), "model.txt")
	if err := os.WriteFile(src, model, 0o600); err != nil {
		t.Fatal(err)
	}
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	m := &Manifest{Artifacts: []Artifact{{Name: "sub/model.txt", URI: src, SHA256: sum(model)}}}
	if err := New(Options{}).Fetch(context.Background(), m, dir); err == nil {
		t.Fatal("fetched through a link leaving the directory")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("wrote outside the directory: %v", entries)
	}
}
