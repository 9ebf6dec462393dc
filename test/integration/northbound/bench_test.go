package northbound_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/client"
	"github.com/mlsysops-go/mlsysops/northbound/handlers"
)

// benchLogger formats access logs as the server does, into nothing.
func benchLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// submitParallelism is BenchmarkSubmit's clients per GOMAXPROCS.
const submitParallelism = 8

// BenchmarkSubmit measures submissions per second over HTTP: a realistic
// description (examples/apps/gpu-inference.yaml, YAML) validated and
// queued with its status, from 8 × GOMAXPROCS concurrent clients (reported
// as "clients").
func BenchmarkSubmit(b *testing.B) {
	e := newEnv(b, handlers.Config{Logger: benchLogger()})
	tmpl := repoFile(b, "examples/apps/gpu-inference.yaml")
	var n atomic.Int64
	ctx := context.Background()
	clients := submitParallelism * runtime.GOMAXPROCS(0)
	b.SetParallelism(submitParallelism)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := "bench-" + strconv.FormatInt(n.Add(1), 10)
			body := bytes.Replace(tmpl, []byte("name: llm-inference"), []byte("name: "+id), 1)
			if _, err := e.op.Applications().Submit(ctx, body, client.YAML); err != nil {
				b.Error(err)
				return
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "submissions/s")
	b.ReportMetric(float64(clients), "clients")
	if b.N >= 100 {
		fmt.Printf("northbound submit: %d submissions in %.2fs = %.0f submissions/s (%d clients, YAML, validated and queued)\n", b.N, elapsed.Seconds(), rate, clients)
	}
}

// BenchmarkListWith10000Apps measures list latency with 10,000
// applications stored (a third of them Running): the first page, a page
// filtered by phase, the last page, and upstream's whole list.
func BenchmarkListWith10000Apps(b *testing.B) {
	e := newEnv(b, handlers.Config{Logger: benchLogger()})
	ctx := context.Background()
	const total = 10000
	apps := e.store.Applications()
	for i := 0; i < total; i++ {
		id := fmt.Sprintf("app-%05d", i)
		if _, err := apps.Submit(ctx, state.Submission{ID: id, Kind: state.KindDeploy, Spec: appJSON(id)}); err != nil {
			b.Fatal(err)
		}
		if i%3 == 0 {
			if _, err := apps.SetStatus(ctx, id, state.StatusUpdate{Phase: "Running", Placement: map[string]string{"web": "cloud-1/cloud-1"}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	first, err := e.view.Applications().List(ctx, client.ListOptions{Limit: 1})
	if err != nil || first.Total != total {
		b.Fatalf("preload: total %d, %v", first.Total, err)
	}
	lastPage := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("app-%05d", total-101)))
	for _, bc := range []struct{ name, path string }{
		{"first-page-100", "/v1/applications?limit=100"},
		{"phase-Running-page-100", "/v1/applications?phase=Running&limit=100"},
		{"last-page-100", "/v1/applications?limit=100&continue=" + lastPage},
		{"upstream-list_all-10000", "/apps/list_all/"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				resp, err := e.view.Do(ctx, http.MethodGet, bc.path, nil, "", nil)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("GET %s: %v %v", bc.path, err, resp)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			p := func(q float64) float64 {
				return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(p(0.50), "p50-ms")
			b.ReportMetric(p(0.99), "p99-ms")
			if b.N > 1 {
				fmt.Printf("northbound list with %d apps, %s: p50 %.1f ms, p99 %.1f ms over %d requests\n", total, bc.name, p(0.50), p(0.99), b.N)
			}
		})
	}
}
