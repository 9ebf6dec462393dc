package deploy

import (
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/runtimes"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var testKey = []byte("0123456789abcdef0123456789abcdef")

func iris() (api.Model, api.Version, api.Artifact) {
	m := api.Model{ModelID: "3f1c7a52-0c0e-4b6e-9a57-6b8f0f7a1d10", ModelSpec: api.ModelSpec{ModelName: "iris", ModelKind: "classification",
		FeatureList: []api.Feature{{FeatureName: "a", Type: "cont"}, {FeatureName: "b", Type: "cont"}, {FeatureName: "species", Type: "cat", Kind: 1}}}}
	v := api.Version{ModelID: m.ModelID, Version: 3, Format: "onnx", Artifact: api.Artifact{ID: "a1", FileName: "Iris MLP.ONNX", Size: 784,
		SHA256: strings.Repeat("ab", 32)}}
	d := api.Artifact{ID: "d1", FileName: "train.csv", Size: 4096, SHA256: strings.Repeat("cd", 32)}
	return m, v, d
}

// TestBuildAppGolden: the application of a GPU deployment, validated by
// the northbound's validator and compared with testdata.
func TestBuildAppGolden(t *testing.T) {
	m, v, d := iris()
	cases := map[string]buildInput{
		"gpu": {ID: "iris-prod", Model: m, Version: v, Data: &d, Runtime: runtimes.BuiltIn("docker.io/mlsysops/modelserver:v1", 8080),
			Spec: api.DeploymentSpec{ModelID: m.ModelID, OwnerID: "alice", Replicas: 1,
				Placement: api.Placement{ClusterID: "cloud-1", Continuum: "cloud"},
				Resources: api.Resources{CPU: "1", GPU: &api.GPU{Count: 1, Model: "NVIDIA-L4", MinMemoryGB: 8}}},
			FetchImage: "docker.io/mlsysops/modelserver:v1", DownloadURL: "http://10.100.0.1:8090/", Key: testKey},
		"custom-runtime": {ID: "llm", Model: m, Version: api.Version{ModelID: m.ModelID, Version: 1, Format: "gguf",
			Artifact: api.Artifact{ID: "a2", FileName: "weights.gguf", Size: 40 << 30, SHA256: strings.Repeat("ef", 32)}},
			Runtime: api.Runtime{Name: "llama", Formats: []string{"gguf"}, Image: "registry.example.org/llama:1", Port: 9000,
				Args: []string{"--model", "{model_file}", "--port", "{port}", "--name", "{model_name}"}},
			Spec: api.DeploymentSpec{ModelID: m.ModelID, OwnerID: "bob", Replicas: 2, Placement: api.Placement{Node: "cloud-gpu-h100-1"},
				Resources: api.Resources{GPU: &api.GPU{Count: 1}}},
			FetchImage: "docker.io/mlsysops/modelserver:v1", DownloadURL: "http://connector:8090", Key: testKey},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			app, err := buildApp(in)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(app)
			if err != nil {
				t.Fatal(err)
			}
			if _, errs := description.ParseApp(b, description.FormatJSON); len(errs) > 0 {
				t.Fatalf("the northbound would refuse it: %v", errs.ToAggregate())
			}
			y, err := yaml.JSONToYAML(b)
			if err != nil {
				t.Fatal(err)
			}
			file := "testdata/" + name + ".app.yaml"
			if *update {
				if err := os.WriteFile(file, y, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(y)); diff != "" {
				t.Errorf("application (-%s +got):\n%s", file, diff)
			}
		})
	}
}

func TestGPUMemory(t *testing.T) {
	m, v, _ := iris()
	cases := map[string]struct {
		size int64
		run  []api.Resource
		ask  int64
		want int64
	}{
		"small model":           {size: 784, want: 1},
		"asked for more":        {size: 784, ask: 24, want: 24},
		"twice the file":        {size: 10 << 30, want: 20},
		"declared by the model": {size: 784, run: []api.Resource{{ResourceName: "gpu_memory", Value: api.Scalar("80")}}, want: 80},
		"declared as a string":  {size: 784, run: []api.Resource{{ResourceName: "gpu_memory_gb", Value: api.Scalar(`"30.5"`)}}, want: 31},
	}
	for name, c := range cases {
		v.Artifact.Size, m.RunResource = c.size, c.run
		if got := GPUMemoryGB(m, v, c.ask); got != c.want {
			t.Errorf("%s: %d GB, want %d", name, got, c.want)
		}
	}
}

func TestDownloadToken(t *testing.T) {
	a := DownloadToken(testKey, "d1", "f1")
	if a != DownloadToken(testKey, "d1", "f1") {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{DownloadToken(testKey, "d2", "f1"), DownloadToken(testKey, "d1", "f2"),
		DownloadToken([]byte("another key of thirty-two bytes!"), "d1", "f1"), DownloadToken(testKey, "d1\x00f", "1")} {
		if other == a {
			t.Errorf("token %s repeats for other input", other)
		}
	}
}

func TestServerFormat(t *testing.T) {
	for _, tc := range []struct{ format, file, want string }{
		{"onnx", "model.onnx", "onnx"},
		{"lightgbm", "model.txt", "lightgbm"},
		{"lightgbm", "model.json", "lightgbm-json"},
		{"xgboost", "model.json", "xgboost-json"},
		{"xgboost", "model.bin", "xgboost"},
		{"other", "model.pt", ""},
	} {
		if got := serverFormat(tc.format, tc.file); got != tc.want {
			t.Errorf("serverFormat(%q, %q) = %q, want %q", tc.format, tc.file, got, tc.want)
		}
	}
}
