package server

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

func BenchmarkTreeModels(b *testing.B) {
	for _, file := range treeFixtures {
		name := strings.TrimSuffix(file, filepath.Ext(file))
		benchModel(b, treeRegistry(), file, name, []tensor.Spec{{Name: "input", DataType: tensor.FP64}})
	}
}

// benchModel measures inference over HTTP (loopback, one client, requests
// one after another) with one row and with a batch of 64 rows (the
// reference rows repeated): inferences (rows) per second and the p50 and
// p99 latency of a request.
func benchModel(b *testing.B, registry *model.Registry, file, name string, specs []tensor.Spec) {
	ts, _ := serve(b, registry, file, name, Config{})
	ref := servingtest.LoadReference(b, name)
	url := ts.URL + "/v2/models/" + name + "/infer"
	for _, batch := range []int{1, 64} {
		r := ref
		r.Inputs = map[string][][]float64{}
		for k, rows := range ref.Inputs {
			for i := range batch {
				r.Inputs[k] = append(r.Inputs[k], rows[i%len(rows)])
			}
		}
		body := inferBody(b, r, specs)
		label := map[int]string{1: "single", 64: "batch64"}[batch]
		b.Run(name+"/"+label, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				t0 := time.Now()
				resp, err := client.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				var out struct {
					Outputs []json.RawMessage `json:"outputs"`
				}
				err = json.NewDecoder(resp.Body).Decode(&out)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%d %v", resp.StatusCode, err)
				}
				lat = append(lat, time.Since(t0))
			}
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "inferences/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds()), "p99-µs")
		})
	}
}
