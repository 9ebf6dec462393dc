package description

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// writeTree creates files (path relative to the returned folder → content).
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadDirRepositoryDescriptions(t *testing.T) {
	set, err := LoadDir("../../descriptions")
	if err != nil {
		t.Fatalf("LoadDir(descriptions): %v", err)
	}
	if set.Continuum == nil || set.Continuum.Name != "mls-continuum" {
		t.Fatalf("continuum = %+v, want mls-continuum", set.Continuum)
	}
	var clusters, nodes []string
	for _, c := range set.Clusters {
		clusters = append(clusters, c.Name)
	}
	for _, n := range set.Nodes {
		nodes = append(nodes, n.Name+"@"+n.Spec.ClusterID)
	}
	if diff := cmp.Diff([]string{"cloud-1", "edge-1"}, clusters); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	want := []string{
		"cloud-1@cloud-1", "cloud-fpga-1@cloud-1", "cloud-gpu-a100-1@cloud-1", "cloud-gpu-h100-1@cloud-1", "cloud-gpu-l4-1@cloud-1",
		"edge-1@edge-1", "edge-jetson-1@edge-1", "edge-t4-1@edge-1", "far-edge-rpi-1@edge-1",
	}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("nodes sorted by name (-want +got):\n%s", diff)
	}
	// Quirks of the repository's files are normalised.
	rpi := set.Node("far-edge-rpi-1")
	if rpi.Spec.Hardware.Memory != 4 || rpi.Spec.Hardware.Disk != 32 {
		t.Errorf("far-edge-rpi-1 memory/disk = %d/%d, want 4/32 from the strings \"4\" and \"32\"", rpi.Spec.Hardware.Memory, rpi.Spec.Hardware.Disk)
	}
	if got := set.Node("edge-jetson-1").Spec.Hardware.CPU.Frequency; !cmp.Equal(got, []int64{1_200_000_000, 2_200_000_000}) {
		t.Errorf("edge-jetson-1 frequencies = %v, want GHz normalised to Hz", got)
	}
	if got := set.Node("edge-jetson-1").Spec.Hardware.GPU.Memory; got != 32 {
		t.Errorf("edge-jetson-1 GPU memory = %d, want 32 from the string \"32\"", got)
	}
	if got := len(set.NodesOf("edge-1")); got != 4 {
		t.Errorf("NodesOf(edge-1) has %d nodes, want 4", got)
	}
	if got := set.FileOf(set.Cluster("cloud-1")); got != filepath.Join("../../descriptions", "clusters", "cloud-1.yaml") {
		t.Errorf("FileOf(cloud-1 cluster) = %q", got)
	}
	if got := len(set.Objects()); got != 12 {
		t.Errorf("Objects() has %d descriptions, want 12", got)
	}
	for _, obj := range set.Objects() {
		if errs := Validate(obj); len(errs) > 0 {
			t.Errorf("Validate(%s %s) = %v", KindOf(obj), obj.GetName(), errs)
		}
	}
}

// TestLoadDirConfigMapMount loads a folder laid out the way the kubelet
// mounts a ConfigMap: the files live in a timestamped folder, ..data links
// to it and every key is a link through ..data.
func TestLoadDirConfigMapMount(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"..2026_11_21_10_00_00.1/node-a.yaml": "MLSysOpsNode: {cluster_id: c1, continuum_layer: edge, environment: {}}",
		"..2026_11_21_10_00_00.1/node-b.yml":  "MLSysOpsNode: {cluster_id: c1, continuum_layer: far_edge, environment: {}}",
		"..2026_11_21_10_00_00.1/c1.yaml":     "MLSysOpsCluster: {cluster_id: c1, nodes: [node-a, node-b]}",
	})
	if err := os.Symlink("..2026_11_21_10_00_00.1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"node-a.yaml", "node-b.yml", "c1.yaml"} {
		if err := os.Symlink(filepath.Join("..data", key), filepath.Join(dir, key)); err != nil {
			t.Fatal(err)
		}
	}
	set, err := LoadDir(dir)
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	if len(set.Nodes) != 2 || set.Nodes[0].Name != "node-a" || set.Nodes[1].Name != "node-b" || len(set.Clusters) != 1 {
		t.Fatalf("loaded %d nodes, %d clusters; want node-a, node-b and c1 once each", len(set.Nodes), len(set.Clusters))
	}

	t.Setenv("NODE_NAME", "node-b")
	node, err := OwnNode(dir)
	if err != nil {
		t.Fatalf("OwnNode: %v", err)
	}
	if node.Name != "node-b" || node.Spec.ContinuumLayer != mlsysopsv1.LayerFarEdge {
		t.Errorf("OwnNode = %s (%s), want node-b (far_edge)", node.Name, node.Spec.ContinuumLayer)
	}
	if _, err := ClusterFor(dir, "node-a"); err == nil {
		t.Errorf("ClusterFor(node-a) found a cluster in a node description")
	}
	t.Setenv("NODE_NAME", "node-z")
	if _, err := OwnNode(dir); err == nil || !strings.Contains(err.Error(), "node-z.yaml") {
		t.Errorf("OwnNode for a missing host = %v, want an error naming node-z.yaml", err)
	}
}

func TestOwnDescriptionsInLayout(t *testing.T) {
	t.Setenv("NODE_NAME", "cloud-1")
	node, err := OwnNode("../../descriptions")
	if err != nil || node.Name != "cloud-1" {
		t.Fatalf("OwnNode = %v, %v; want cloud-1", node, err)
	}
	cluster, err := OwnCluster("../../descriptions")
	if err != nil || cluster.Name != "cloud-1" || len(cluster.Spec.Nodes) != 5 {
		t.Fatalf("OwnCluster = %v, %v; want cloud-1 with 5 nodes", cluster, err)
	}
	continuum, err := ContinuumFor("../../descriptions", "mls-continuum")
	if err != nil || continuum.Spec.ContinuumID != "mls-continuum" {
		t.Fatalf("ContinuumFor = %v, %v", continuum, err)
	}
	if _, err := OwnContinuum("../../descriptions"); err == nil {
		t.Errorf("OwnContinuum on host cloud-1 found a continuum description")
	}
	t.Setenv("NODE_NAME", "")
	h, err := Hostname()
	if want, _ := os.Hostname(); err != nil || h != want {
		t.Errorf("Hostname() without NODE_NAME = %q, %v; want %q", h, err, want)
	}
}

func TestLoadDirCrossChecks(t *testing.T) {
	const (
		continuum = "MLSysOpsContinuum: {continuum_id: x, clusters: [c1]}"
		cluster   = "MLSysOpsCluster: {cluster_id: c1, nodes: [n1]}"
		node      = "MLSysOpsNode: {cluster_id: c1, continuum_layer: edge, environment: {}}"
	)
	cases := map[string]struct {
		files map[string]string
		// want lists "file field type" for every problem.
		want []string
	}{
		"consistent": {
			files: map[string]string{"continuum/host.yaml": continuum, "clusters/c1.yaml": cluster, "nodes/n1.yaml": node},
		},
		"only nodes: no cross-checks": {
			files: map[string]string{"n1.yaml": node, "n2.yaml": strings.Replace(node, "c1", "c9", 1)},
		},
		"only a continuum: no cross-checks": {
			files: map[string]string{"host.yaml": continuum},
		},
		"continuum lists a cluster without description": {
			files: map[string]string{"continuum/host.yaml": "MLSysOpsContinuum: {continuum_id: x, clusters: [c1, c2]}", "clusters/c1.yaml": cluster, "nodes/n1.yaml": node},
			want:  []string{"continuum/host.yaml MLSysOpsContinuum.clusters[1] FieldValueNotFound"},
		},
		"empty nodes folder: every listed node is missing": {
			files: map[string]string{"clusters/c1.yaml": cluster, "nodes/README.md": "no nodes yet"},
			want:  []string{"clusters/c1.yaml MLSysOpsCluster.nodes[0] FieldValueNotFound"},
		},
		"cluster lists a node without description": {
			files: map[string]string{"clusters/c1.yaml": "MLSysOpsCluster: {cluster_id: c1, nodes: [n1, n2]}", "nodes/n1.yaml": node},
			want:  []string{"clusters/c1.yaml MLSysOpsCluster.nodes[1] FieldValueNotFound"},
		},
		"node cluster_id disagrees": {
			files: map[string]string{"clusters/c1.yaml": cluster, "clusters/c2.yaml": "MLSysOpsCluster: {cluster_id: c2, nodes: []}",
				"nodes/n1.yaml": strings.Replace(node, "c1", "c2", 1)},
			want: []string{"nodes/n1.yaml MLSysOpsNode.cluster_id FieldValueInvalid"},
		},
		"node without cluster_id listed by a cluster": {
			files: map[string]string{"clusters/c1.yaml": cluster, "nodes/n1.yaml": "MLSysOpsNode: {continuum_layer: edge, environment: {}}"},
			want:  []string{"nodes/n1.yaml MLSysOpsNode.cluster_id FieldValueRequired"},
		},
		"node of an undescribed cluster": {
			files: map[string]string{"clusters/c1.yaml": cluster, "nodes/n1.yaml": node, "nodes/n2.yaml": strings.Replace(node, "c1", "c7", 1)},
			want:  []string{"nodes/n2.yaml MLSysOpsNode.cluster_id FieldValueNotFound"},
		},
		"node its cluster does not list": {
			files: map[string]string{"clusters/c1.yaml": cluster, "nodes/n1.yaml": node, "nodes/n2.yaml": node},
			want:  []string{"nodes/n2.yaml MLSysOpsNode.cluster_id FieldValueInvalid"},
		},
		"node listed by two clusters": {
			files: map[string]string{"clusters/c1.yaml": cluster, "clusters/c2.yaml": "MLSysOpsCluster: {cluster_id: c2, nodes: [n1]}", "nodes/n1.yaml": node},
			want:  []string{"clusters/c2.yaml MLSysOpsCluster.nodes[0] FieldValueInvalid"},
		},
		"host name described twice": {
			files: map[string]string{"nodes/n1.yaml": node, "nodes/n1.yml": node},
			want:  []string{"nodes/n1.yml  FieldValueInvalid"},
		},
		"cluster id described twice": {
			files: map[string]string{"clusters/a.yaml": cluster, "clusters/b.yaml": cluster},
			want:  []string{"clusters/b.yaml  FieldValueInvalid"},
		},
		"node file not named after the host": {
			files: map[string]string{"nodes/n1.yaml": "MLSysOpsNode: {name: other, continuum_layer: edge, environment: {}}"},
			want:  []string{"nodes/n1.yaml  FieldValueInvalid"},
		},
		"two continuum descriptions": {
			files: map[string]string{"continuum/a.yaml": continuum, "continuum/b.yaml": continuum},
			want:  []string{"continuum/b.yaml  FieldValueInvalid"},
		},
		"wrong kind in a folder": {
			files: map[string]string{"clusters/n1.yaml": node},
			want:  []string{"clusters/n1.yaml  FieldValueInvalid"},
		},
		"an application among descriptions": {
			files: map[string]string{"app.yaml": "MLSysOpsApp: {name: a, components: [{metadata: {name: w}, containers: [{image: x}]}]}", "n1.yaml": node},
			want:  []string{"app.yaml  FieldValueNotSupported"},
		},
		"every broken file reported, with the set checks": {
			files: map[string]string{
				"continuum/host.yaml": "MLSysOpsContinuum: {continuum_id: x, clusters: [c1, c3]}",
				"clusters/c1.yaml":    cluster,
				"nodes/n1.yaml":       "MLSysOpsNode: {cluster_id: c1, continuum_layer: fog, environment: {os: dos}}",
				"nodes/n2.yaml":       "MLSysOpsNode: [",
			},
			want: []string{
				"continuum/host.yaml MLSysOpsContinuum.clusters[1] FieldValueNotFound",
				"nodes/n1.yaml MLSysOpsNode.continuum_layer FieldValueNotSupported",
				"nodes/n1.yaml MLSysOpsNode.environment.os FieldValueNotSupported",
				"nodes/n2.yaml  FieldValueInvalid",
				// n1 did not load, so the cluster's node is missing too.
				"clusters/c1.yaml MLSysOpsCluster.nodes[0] FieldValueNotFound",
			},
		},
		"hidden and unrelated files are ignored": {
			files: map[string]string{"nodes/n1.yaml": node, "nodes/.n1.yaml.swp": "junk", "README.md": "# hi", "other/x.yaml": "junk: ["},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := writeTree(t, tc.files)
			set, err := LoadDir(dir)
			var got []string
			if err != nil {
				var lerr *Error
				if !errors.As(err, &lerr) {
					t.Fatalf("LoadDir error %v is not an *Error", err)
				}
				if set != nil {
					t.Errorf("LoadDir returned a set together with an error")
				}
				for _, p := range lerr.Problems {
					rel, _ := filepath.Rel(dir, p.File)
					got = append(got, filepath.ToSlash(rel)+" "+p.Field+" "+p.Type)
				}
			}
			sort.Strings(got)
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("LoadDir problems (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

func TestLoadDirErrors(t *testing.T) {
	if _, err := LoadDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no .yaml") {
		t.Errorf("LoadDir(empty folder) = %v, want an error saying it found no files", err)
	}
	if _, err := LoadDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Errorf("LoadDir(missing folder) succeeded")
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Errorf("LoadFile(missing file) succeeded")
	}
}

func TestErrorRendering(t *testing.T) {
	dir := writeTree(t, map[string]string{"n1.yaml": "MLSysOpsNode: {continuum_layer: fog, environment: {}}"})
	_, err := LoadFile(filepath.Join(dir, "n1.yaml"))
	problems := ProblemsOf(err)
	want := []Problem{{
		File:    filepath.Join(dir, "n1.yaml"),
		Field:   "MLSysOpsNode.continuum_layer",
		Type:    "FieldValueNotSupported",
		Message: `Unsupported value: "fog": supported values: "cloud", "edge_infrastructure", "edge", "far_edge"`,
	}}
	if diff := cmp.Diff(want, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if got, want := err.Error(), want[0].File+": MLSysOpsNode.continuum_layer: "+want[0].Message; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := ProblemsOf(errors.New("boom")); len(got) != 1 || got[0].Message != "boom" {
		t.Errorf("ProblemsOf(plain error) = %+v", got)
	}
}
