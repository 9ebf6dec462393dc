package app

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/onnx"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
)

// BenchmarkStartToReady builds the modelserver binary, then starts it on
// each fixture model and measures the time from exec to a 200 from
// /v2/health/ready, and the process's resident memory once ready and after
// 2,000 single-row inferences (VmRSS, VmHWM from /proc).
func BenchmarkStartToReady(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "modelserver")
	build := exec.Command("go", "build", "-o", bin, "github.com/mlsysops-go/mlsysops/mlconnector/modelserver")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	models := []string{"iris_gbm.txt", "cancer_gbm.txt", "diabetes_gbm.txt", "iris_xgb.json", "cancer_xgb.json", "diabetes_xgb.json"}
	env := os.Environ()
	if onnx.Available {
		models = append(models, "iris_mlp.onnx", "diabetes_linear.onnx")
		env = append(env, "ONNXRUNTIME_LIB="+servingtest.ONNXRuntime(b))
	}
	for _, file := range models {
		name := strings.TrimSuffix(file, filepath.Ext(file))
		b.Run(name, func(b *testing.B) {
			var ready time.Duration
			var rss, hwm float64
			for range b.N {
				d, r, h := startOnce(b, bin, env, file, name)
				ready += d
				rss, hwm = r, h
			}
			b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ms-to-ready")
			b.ReportMetric(rss, "rss-MiB")
			b.ReportMetric(hwm, "peak-rss-MiB")
		})
	}
}

func startOnce(b *testing.B, bin string, env []string, file, name string) (time.Duration, float64, float64) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "serve", "--listen", addr, "--model", servingtest.Path(file),
		"--background", servingtest.TrainingCSV(b, name), "--termination-log", "", "--log-level", "error")
	cmd.Env = env
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get("http://" + addr + "/v2/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Since(start) > 60*time.Second {
			b.Fatal("not ready after 60s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	ready := time.Since(start)
	ref := servingtest.LoadReference(b, name)
	var inputs []string
	for in, rows := range ref.Inputs {
		dt := "FP64"
		if name == "iris_mlp" {
			dt = "FP32"
		}
		inputs = append(inputs, fmt.Sprintf(`{"name":%q,"shape":[1,%d],"datatype":%q,"data":%s}`, in, len(rows[0]), dt, strings.ReplaceAll(fmt.Sprint(rows[0]), " ", ",")))
	}
	body := `{"inputs":[` + strings.Join(inputs, ",") + `]}`
	for range 2000 {
		resp, err := client.Post("http://"+addr+"/v2/models/"+name+"/infer", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("infer: %d", resp.StatusCode)
		}
	}
	rss, hwm := memory(b, cmd.Process.Pid)
	return ready, rss, hwm
}

// memory reads VmRSS and VmHWM (MiB) of a process.
func memory(b *testing.B, pid int) (rss, hwm float64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}
