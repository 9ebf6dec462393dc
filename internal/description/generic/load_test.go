package generic

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadOwnNode(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "nodes/edge-7.yaml", `MLSysOpsNode:
  cluster_id: edge-1
  continuum_layer: edge
  mobility: false
  environment: {node_type: native, os: ubuntu, container_runtime: [containerd]}
  hardware:
    cpu: {architecture: arm64, cores: 4, frequency: ["1.5GHz", 600]}
    memory: "8"
    disk: "64"
  permitted_actions: [cpu_frequency]
`)
	d, err := LoadOwn(dir, "edge-7", KindNode)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "edge-7" || d.Kind != KindNode || d.File != filepath.Join(dir, "nodes", "edge-7.yaml") {
		t.Errorf("loaded %s %s from %s", d.Kind, d.Name, d.File)
	}
	hw := d.Spec["hardware"].(map[string]interface{})
	want := map[string]interface{}{
		"cluster_id": "edge-1", "mobile": false, "memory": int64(8),
		"frequency": []interface{}{int64(1500000000), int64(600000000)},
	}
	got := map[string]interface{}{
		"cluster_id": d.Spec["cluster_id"], "mobile": d.Spec["mobile"], "memory": hw["memory"],
		"frequency": hw["cpu"].(map[string]interface{})["frequency"],
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("normalised spec (-want +got):\n%s", diff)
	}
}

func TestLoadOwnProblems(t *testing.T) {
	cases := map[string]struct {
		file, body string
		want       []string
	}{
		"upstream form": {
			file: "nodes/n1.yaml",
			body: "MLSysOpsNode:\n  cluster_id: Bad_Cluster\n  continuum_layer: fog\n  environment: {os: ubuntu}\n  hardwre: {}\n  location: [200, 0]\n",
			want: []string{
				`MLSysOpsNode.cluster_id: Invalid value: "Bad_Cluster": a lowercase RFC 1123 label`,
				`MLSysOpsNode.continuum_layer: Unsupported value: "fog"`,
				`MLSysOpsNode.hardwre: Unsupported value: unknown field; did you mean "hardware"?`,
				`MLSysOpsNode.location[0]: Invalid value: 200: longitude must be between -180 and 180`,
			},
		},
		"resource form": {
			file: "n1.yaml",
			body: "apiVersion: mlsysops.eu/v1\nkind: MLSysOpsNode\nmetadata: {name: n1, namespace: Bad_NS, colour: red}\nspec: {continuum_layer: cloud, environment: {os: ubuntu}, labels: [gpu, 'gpu:true']}\n",
			want: []string{
				`metadata: Invalid value: unknown field "colour"`,
				`metadata.namespace: Invalid value: "Bad_NS"`,
				`spec.labels[1]: Invalid value: "gpu:true": gives the same Kubernetes label key mlsysops.eu/label.gpu as "gpu"`,
			},
		},
		"name from the file": {
			file: "nodes/n1.yaml",
			body: "MLSysOpsNode:\n  name: other\n  continuum_layer: cloud\n  environment: {os: ubuntu}\n",
		},
		"not a mapping": {
			file: "nodes/n1.yaml",
			body: "- a\n- b\n",
			want: []string{"must be a mapping"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, tc.file, tc.body)
			d, err := LoadOwn(dir, "n1", KindNode)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if d.Name != "other" {
					t.Errorf("name = %q, want the description's name", d.Name)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if len(e.Problems) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%v", len(e.Problems), len(tc.want), err)
			}
			for i, w := range tc.want {
				if i < len(e.Problems) && !strings.Contains(e.Problems[i].String(), w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, e.Problems[i].String(), w)
				}
			}
		})
	}
}

func TestLoadOwnWrongKindOrMissing(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "n1.yaml", "MLSysOpsCluster:\n  cluster_id: n1\n  nodes: [a]\n")
	if _, err := LoadOwn(dir, "n1", KindNode); err == nil || !strings.Contains(err.Error(), "it is a MLSysOpsCluster, expected a MLSysOpsNode") {
		t.Errorf("wrong kind: err = %v", err)
	}
	if _, err := LoadOwn(dir, "n2", KindNode); err == nil || !strings.Contains(err.Error(), "name the file after the host name") {
		t.Errorf("missing file: err = %v", err)
	}
}
