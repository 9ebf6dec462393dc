package mlconnector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/cmd/mls/commands"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
)

// mls runs the mls command and returns its exit code and outputs.
func mls(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := commands.Execute(context.Background(), commands.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, args)
	return code, out.String(), errOut.String()
}

func mustMLS(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := mls(t, args...)
	if code != 0 {
		t.Fatalf("mls %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// TestCLI drives the connector through mls ml: register, upload, alias,
// deploy and wait, list, show, scale, operations, drift that lacks data,
// delete.
func TestCLI(t *testing.T) {
	e := newEnv(t)
	testbed.StartTestAgents(t, e.tb, testbed.TestAgentsOptions{Nodes: true})
	t.Setenv("MLS_MLCONNECTOR_ENDPOINT", e.tb.MLConnectorURL)
	t.Setenv("MLS_TOKEN", e.tb.NorthboundToken)
	dir := t.TempDir()
	spec, _ := json.Marshal(irisSpec(uniq("cli")))
	specFile := filepath.Join(dir, "model.json")
	modelFile := filepath.Join(dir, "iris.onnx")
	_ = os.WriteFile(specFile, spec, 0o644)
	// A real model: the GPU deployment below runs on the testbed's real
	// GPU node, whose model server loads it.
	_ = os.WriteFile(modelFile, fixture(t, "iris_mlp.onnx"), 0o644)

	var m api.Model
	if err := json.Unmarshal([]byte(mustMLS(t, "ml", "model", "add", "--path", specFile, "-o", "json")), &m); err != nil || m.ModelID == "" {
		t.Fatalf("model add: %v", err)
	}
	t.Cleanup(func() { e.cleanupModel(t, m.ModelID) })
	if out := mustMLS(t, "ml", "model", "upload", m.ModelID, modelFile, "--kind", "model"); !strings.Contains(out, "version 1 (onnx)") {
		t.Errorf("upload:\n%s", out)
	}
	mustMLS(t, "ml", "model", "alias", m.ModelID, "production", "1")
	if out := mustMLS(t, "ml", "model", "list", "--tag", "integration"); !strings.Contains(out, m.ModelID) || !strings.Contains(out, "production=1") {
		t.Errorf("model list:\n%s", out)
	}
	id := uniq("cli")
	out := mustMLS(t, "ml", "deployment", "create", "--model", m.ModelID, "--owner", "erin", "--id", id, "--version", "production",
		"--gpus", "1", "--cluster", "cloud-1", "--wait", "3m")
	if !strings.Contains(out, id) || !strings.Contains(out, "Ready") || !strings.Contains(out, "endpoint: http://model.mls-"+id+".svc:8080") {
		t.Errorf("deployment create --wait:\n%s", out)
	}
	if out := mustMLS(t, "ml", "deployment", "list", "--owner", "erin"); !strings.Contains(out, id) {
		t.Errorf("deployment list:\n%s", out)
	}
	if out := mustMLS(t, "ml", "deployment", "scale", id, "2", "-o", "json"); !strings.Contains(out, `"replicas": 2`) {
		t.Errorf("scale:\n%s", out)
	}
	code, _, errOut := mls(t, "ml", "drift", "check", m.ModelID)
	if code != 1 || !strings.Contains(errOut, "needs at least 10") {
		t.Errorf("drift check without inputs: exit %d %s", code, errOut)
	}
	code, _, errOut = mls(t, "ml", "deployment", "create", "--model", m.ModelID, "--owner", "erin", "--version", "7")
	if code != 1 || !strings.Contains(errOut, "HTTP 422") || !strings.Contains(errOut, "no version") {
		t.Errorf("deploy a missing version: exit %d %s", code, errOut)
	}
	if out := mustMLS(t, "ml", "deployment", "delete", id); !strings.Contains(out, "being removed") {
		t.Errorf("delete:\n%s", out)
	}
	if err := e.waitGone(ctxT(t), id); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = mls(t, "ml", "deployment", "get", id)
	if code != 1 || !strings.Contains(errOut, "HTTP 404") {
		t.Errorf("get a removed deployment: exit %d %s", code, errOut)
	}
}
