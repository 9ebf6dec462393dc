package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/deploy"
	"github.com/mlsysops-go/mlsysops/mlconnector/handlers"
	"github.com/mlsysops-go/mlsysops/mlconnector/internal/dbtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	"github.com/mlsysops-go/mlsysops/mlconnector/ops"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
	"github.com/mlsysops-go/mlsysops/mlconnector/runtimes"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/explain"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/server"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/trees"
)

// BenchmarkPredict: one-row predictions of the LightGBM iris model, one
// client sending them one after another, through the connector (bearer
// token, feature mapping, forwarding, the operation written to a real
// PostgreSQL) and straight to the model server (Open Inference Protocol),
// both on loopback: predictions per second, p50 and p99 latency, and the
// connector's overhead as the ratio of the p50s.
func BenchmarkPredict(b *testing.B) {
	connURL, port := servedDeployment(b)

	row := `{"sepal_length": 5.9, "sepal_width": 3.0, "petal_length": 5.1, "petal_width": 1.8}`
	p50 := map[string]time.Duration{}
	for _, c := range []struct{ name, url, body, token string }{
		{"connector", connURL + "/v1/deployments/bench/predict", `{"data": ` + row + `}`, opToken},
		{"model-server", fmt.Sprintf("http://127.0.0.1:%d/v2/models/model/infer", port),
			`{"inputs": [{"name": "input", "datatype": "FP64", "shape": [1, 4], "data": [5.9, 3.0, 5.1, 1.8]}]}`, ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				t0 := time.Now()
				req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(c.body))
				req.Header.Set("Content-Type", "application/json")
				if c.token != "" {
					req.Header.Set("Authorization", "Bearer "+c.token)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d %s", c.name, resp.StatusCode, body)
				}
				lat = append(lat, time.Since(t0))
			}
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			p50[c.name] = lat[len(lat)/2]
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "predictions/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds()), "p99-µs")
		})
	}
	if p50["model-server"] > 0 {
		b.Logf("connector overhead: p50 %v through the connector / %v straight to the model server = %.1fx",
			p50["connector"], p50["model-server"], float64(p50["connector"])/float64(p50["model-server"]))
	}
}

// servedDeployment starts the LightGBM iris model in an in-process model
// server (version "1", its training data as the explanations' background)
// and a connector on a real PostgreSQL with a Ready deployment "bench"
// whose pod is that server; it returns the connector's URL and the model
// server's port.
func servedDeployment(tb testing.TB) (string, int) {
	tb.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The model server, in process.
	treeModels := model.NewRegistry()
	trees.Register(treeModels)
	mdl, err := treeModels.Load("", servingtest.Path("iris_gbm.txt"), model.Options{Threads: 1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { mdl.Close() })
	ms := server.New(server.Config{Name: deploy.ModelName, Version: "1", Logger: quiet})
	layout, err := explain.NewLayout(mdl.Metadata())
	if err != nil {
		tb.Fatal(err)
	}
	bg, err := explain.LoadBackground(servingtest.TrainingCSV(tb, "iris_gbm"), layout, []string{"target"}, 50, 1)
	if err != nil {
		tb.Fatal(err)
	}
	ms.SetModel(mdl, bg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	hs := &http.Server{Handler: ms.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	tb.Cleanup(func() { hs.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	// The connector with a Ready deployment whose pod is that server.
	pool := dbtest.Pool(tb)
	store, _ := objstore.NewFS(tb.TempDir())
	reg := registry.New(pool, store, registry.Options{Logger: quiet})
	features := []api.Feature{{FeatureName: "target", Type: api.FeatureCategorical, Kind: api.FeatureTarget}}
	for _, f := range []string{"sepal_length", "sepal_width", "petal_length", "petal_width"} {
		features = append(features, api.Feature{FeatureName: f, Type: api.FeatureContinuous})
	}
	m, err := reg.CreateModel(ctx, api.ModelSpec{ModelName: "iris", ModelKind: "classification", FeatureList: features}, "alice")
	if err != nil {
		tb.Fatal(err)
	}
	file, err := os.ReadFile(servingtest.Path("iris_gbm.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := reg.Upload(ctx, registry.UploadRequest{ModelID: m.ModelID, Kind: api.FileModel, FileName: "iris_gbm.txt",
		Body: strings.NewReader(string(file)), Size: int64(len(file)), Format: "lightgbm"}); err != nil {
		tb.Fatal(err)
	}
	pods, _ := json.Marshal([]api.Pod{{Name: "model-0", Cluster: "c", IP: "127.0.0.1", Phase: "Running", Ready: true, Stage: api.PhaseReady, ModelVersion: 1}})
	if _, err := pool.Exec(ctx, `INSERT INTO deployments (id, model_id, owner, spec, version, phase, endpoint, pods, serving)
		VALUES ('bench', $1, 'alice', '{}', 1, 'Ready', '{"cluster": "c", "url": "http://model.mls-bench.svc:8080"}', $2, $3)`,
		m.ModelID, pods, fmt.Sprintf(`{"runtime": "modelserver", "port": %d, "format": "lightgbm"}`, port)); err != nil {
		tb.Fatal(err)
	}
	key, err := deploy.Key(ctx, pool)
	if err != nil {
		tb.Fatal(err)
	}
	opsLog := ops.New(pool)
	mgr, err := deploy.New(pool, reg, runtimes.New(pool, runtimes.BuiltIn("modelserver", 8080)), nil, opsLog, key,
		deploy.Options{Access: deploy.AccessPod, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	a, err := handlers.New(handlers.Config{Registry: reg, Deployments: mgr, Operations: opsLog,
		Auth:   auth.Static([]auth.Entry{{Token: opToken, Identity: auth.Identity{Name: "alice", Role: auth.RoleOperator}}}),
		Logger: quiet, UploadDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	conn := httptest.NewServer(a)
	tb.Cleanup(conn.Close)
	return conn.URL, port

}
