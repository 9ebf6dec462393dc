package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Execute(context.Background(), IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, args)
	return code, out.String(), errOut.String()
}

func write(t *testing.T, dir, rel, content string) string {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidateRepositoryFiles(t *testing.T) {
	code, out, errOut := run(t, "validate", "../../../descriptions", "../../../examples/apps")
	if code != 0 {
		t.Fatalf("mls validate descriptions examples/apps = %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"ok       ../../../descriptions/nodes/cloud-gpu-h100-1.yaml (MLSysOpsNode cloud-gpu-h100-1)",
		"ok       ../../../descriptions/continuum/mls-continuum.yaml (MLSysOpsContinuum mls-continuum)",
		"ok       ../../../examples/apps/gpu-inference.yaml (MLSysOpsApp llm-inference)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if got := strings.Count(out, "\n"); got != 17 {
		t.Errorf("output has %d lines, want 17 (12 descriptions, 5 applications):\n%s", got, out)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	bad := write(t, dir, "bad.yaml", "MLSysOpsNode:\n  continuum_layer: fog\n  environment: {os: dos}\n  hardware: {memory: lots}\n")
	good := write(t, dir, "good.yaml", "MLSysOpsCluster: {cluster_id: c1, nodes: [n1]}\n")
	code, out, errOut := run(t, "validate", good, bad, filepath.Join(dir, "missing.yaml"))
	if code != 1 {
		t.Fatalf("exit code = %d, want 1", code)
	}
	want := []string{
		"ok       " + good + " (MLSysOpsCluster c1)",
		"problem  " + bad + `: MLSysOpsNode.continuum_layer: Unsupported value: "fog": supported values: "cloud", "edge_infrastructure", "edge", "far_edge"`,
		"problem  " + bad + `: MLSysOpsNode.environment.os: Unsupported value: "dos": supported values: "ubuntu", "kali", "zephyr"`,
		"problem  " + bad + `: MLSysOpsNode.hardware.memory: Invalid value: "lots": must be a whole number, not a string`,
		"problem  " + filepath.Join(dir, "missing.yaml") + ": stat " + filepath.Join(dir, "missing.yaml") + ": no such file or directory",
	}
	if diff := cmp.Diff(strings.Join(want, "\n")+"\n", out); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if errOut != "4 problem(s) found\n" {
		t.Errorf("stderr = %q", errOut)
	}
}

func TestValidateCrossChecksLayout(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "continuum/host.yaml", "MLSysOpsContinuum: {continuum_id: x, clusters: [c1]}\n")
	write(t, dir, "clusters/c1.yaml", "MLSysOpsCluster: {cluster_id: c1, nodes: [n1, n2]}\n")
	write(t, dir, "nodes/n1.yaml", "MLSysOpsNode: {cluster_id: c1, continuum_layer: edge, environment: {}}\n")
	code, out, _ := run(t, "validate", dir)
	if code != 1 || !strings.Contains(out, filepath.Join(dir, "clusters", "c1.yaml")+`: MLSysOpsCluster.nodes[1]: Not found: "n2": no node description has this host name`) {
		t.Errorf("exit %d, output:\n%s", code, out)
	}

	// A flat folder of system descriptions is cross-checked too.
	flat := t.TempDir()
	write(t, flat, "c1.yaml", "MLSysOpsCluster: {cluster_id: c1, nodes: [n1]}\n")
	write(t, flat, "n1.yaml", "MLSysOpsNode: {cluster_id: c2, continuum_layer: edge, environment: {}}\n")
	code, out, _ = run(t, "validate", flat)
	if code != 1 || !strings.Contains(out, "MLSysOpsNode.cluster_id: Invalid value: \"c2\": cluster c1 lists this node") {
		t.Errorf("flat folder: exit %d, output:\n%s", code, out)
	}
}

func TestValidateJSONOutput(t *testing.T) {
	dir := t.TempDir()
	bad := write(t, dir, "app.json", `{"MLSysOpsApp": {"name": "a", "components": [{"metadata": {"name": "w"}, "depends_on": ["x"], "containers": [{"image": "i"}]}]}}`)
	code, out, _ := run(t, "validate", "-o", "json", bad)
	if code != 1 {
		t.Fatalf("exit code = %d, want 1", code)
	}
	var report validateReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	want := validateReport{Valid: []checked{}, Problems: report.Problems}
	if diff := cmp.Diff(want, report); diff != "" || len(report.Problems) != 1 {
		t.Fatalf("report (-want +got):\n%s", diff)
	}
	p := report.Problems[0]
	if p.File != bad || p.Field != "MLSysOpsApp.components[0].depends_on[0]" || p.Type != "FieldValueNotFound" {
		t.Errorf("problem = %+v", p)
	}
}

func TestValidateOptions(t *testing.T) {
	cases := map[string]struct {
		opts    ValidateOptions
		wantErr bool
	}{
		"text":  {opts: ValidateOptions{Output: "text"}},
		"json":  {opts: ValidateOptions{Output: "json"}},
		"yaml":  {opts: ValidateOptions{Output: "yaml"}, wantErr: true},
		"empty": {opts: ValidateOptions{}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := tc.opts.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tc.wantErr)
			}
		})
	}
	if code, _, errOut := run(t, "validate"); code != 1 || !strings.Contains(errOut, "requires at least 1 arg") {
		t.Errorf("mls validate without arguments: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := run(t, "validate", "-o", "xml", "x"); code != 1 || !strings.Contains(errOut, "--output must be text or json") {
		t.Errorf("mls validate -o xml: exit %d, stderr %q", code, errOut)
	}
}
