package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestServeOptionsValidate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*ServeOptions)
		want   []string
	}{
		"valid": {func(o *ServeOptions) { o.Model = "m.onnx" }, nil},
		"everything wrong": {func(o *ServeOptions) {
			o.Listen, o.Format, o.Name, o.BackgroundSize, o.Threads = "nocolon", "pmml", "a/b", 0, -1
			o.MaxBodyBytes, o.RequestTimeout, o.ExplainConcurrency, o.LogLevel, o.LogFormat = 10, 0, 0, "loud", "xml"
		}, []string{"--listen", "--model is required", "--format", "--name", "--background-size", "--threads",
			"--max-body-bytes", "--request-timeout", "--explain-concurrency", "--log-level", "--log-format"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := NewServeOptions()
			tc.mutate(o)
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v does not mention %q", err, w)
				}
			}
		})
	}
}

func TestFetchOptionsValidate(t *testing.T) {
	o := NewFetchOptions()
	o.ManifestJSON, o.Attempts, o.MaxBytes = "", 0, -1
	err := o.Validate()
	for _, w := range []string{"no manifest", "--dest", "--attempts", "--max-bytes"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not mention %q", err, w)
		}
	}
}

// TestServeLifecycle runs the server as the command does: live at once,
// ready once loaded, answering, then stopped by its context.
func TestServeLifecycle(t *testing.T) {
	o := NewServeOptions()
	o.Listen, o.Model, o.Name, o.Version = "127.0.0.1:0", servingtest.Path("iris_gbm.txt"), "iris", "7"
	o.Background = servingtest.TrainingCSV(t, "iris_gbm")
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx, quiet(), addr) }()
	base := "http://" + <-addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/v2/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Post(base+"/v2/models/iris/versions/7/infer", "application/json",
		strings.NewReader(`{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP64","data":[5.1,3.5,1.4,0.2]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"name":"label","datatype":"INT64","shape":[1],"data":[0]`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := http.Get(base + "/v2/health/live"); err == nil {
		t.Error("still serving after stop")
	}
}

// TestFailuresReachTheTerminationLog: the init container's and the
// server's failures are what Kubernetes will show.
func TestFailuresReachTheTerminationLog(t *testing.T) {
	dir := t.TempDir()
	model, err := os.ReadFile(servingtest.Path("iris_gbm.txt"))
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "model.txt")
	if err := os.WriteFile(src, model, 0o600); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(model)
	good := hex.EncodeToString(h[:])
	bad := strings.Repeat("0", 64)
	broken := filepath.Join(dir, "broken.txt")
	if err := os.WriteFile(broken, model[:len(model)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args []string
		env  map[string]string
		want string // empty: success
	}{
		"fetch ok": {args: []string{"fetch", "--dest", filepath.Join(dir, "ok")},
			env: map[string]string{"MODELSERVER_MANIFEST": `{"artifacts":[{"name":"model.txt","uri":"` + src + `","sha256":"` + good + `"}]}`}},
		"checksum mismatch": {args: []string{"fetch", "--dest", filepath.Join(dir, "bad")},
			env:  map[string]string{"MODELSERVER_MANIFEST": `{"artifacts":[{"name":"model.txt","uri":"` + src + `","sha256":"` + bad + `"}]}`},
			want: "checksum mismatch: model.txt"},
		"artifact missing": {args: []string{"fetch", "--dest", filepath.Join(dir, "missing")},
			env:  map[string]string{"MODELSERVER_MANIFEST": `{"artifacts":[{"name":"model.txt","uri":"` + src + `.gone","sha256":"` + good + `"}]}`},
			want: "artifact missing: model.txt"},
		"traversal": {args: []string{"fetch", "--dest", filepath.Join(dir, "trav")},
			env:  map[string]string{"MODELSERVER_MANIFEST": `{"artifacts":[{"name":"../x","uri":"` + src + `","sha256":"` + good + `"}]}`},
			want: "invalid manifest: artifacts[0].name"},
		"no manifest": {args: []string{"fetch", "--dest", dir}, want: "invalid manifest: no manifest"},
		"model load failed": {args: []string{"serve", "--listen", "127.0.0.1:0", "--model", broken, "--format", "lightgbm"},
			want: "model load failed: load lightgbm model"},
		"bad flags": {args: []string{"serve", "--listen", "x"}, want: "--listen \"x\""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tlog := filepath.Join(t.TempDir(), "termination-log")
			cmd := NewCommand()
			cmd.SetArgs(append(tc.args, "--termination-log", tlog, "--log-format", "text", "--log-level", "error"))
			cmd.SetOut(io.Discard)
			err := cmd.Execute()
			msg, _ := os.ReadFile(tlog)
			if tc.want == "" {
				if err != nil || len(msg) != 0 {
					t.Fatalf("error %v, termination log %q", err, msg)
				}
				return
			}
			if err == nil || !strings.HasPrefix(string(msg), tc.want) {
				t.Fatalf("error %v, termination log %q, want it to start with %q", err, msg, tc.want)
			}
		})
	}
}
