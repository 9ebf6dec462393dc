package gen

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/resources"
)

// Generated descriptions load and validate like hand-written ones, with
// the sizes asked for and a mix of GPU models, architectures and layers;
// the same seed writes the same files.
func TestWriteLoads(t *testing.T) {
	o := Options{Clusters: 3, Nodes: 60, Continuum: "scale-continuum", Seed: 7}
	dir := t.TempDir()
	if err := Write(dir, o); err != nil {
		t.Fatal(err)
	}
	set, err := description.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Clusters) != 3 || len(set.Nodes) != 180 || set.Continuum == nil || set.Continuum.Name != "scale-continuum" {
		t.Fatalf("%d clusters, %d nodes, continuum %v", len(set.Clusters), len(set.Nodes), set.Continuum)
	}
	gpus, archs, layers := map[string]int{}, map[string]int{}, map[string]int{}
	for _, n := range set.Nodes {
		l := resources.NodeLabels(n)
		if m := l["nvidia.com/gpu.product"]; m != "" {
			gpus[m]++
		}
		archs[l["kubernetes.io/arch"]]++
		layers[l["mlsysops.eu/layer"]]++
	}
	if len(gpus) < 4 || len(archs) != 2 || len(layers) < 3 {
		t.Errorf("mix too narrow: GPUs %v, architectures %v, layers %v", gpus, archs, layers)
	}
	for _, c := range ClusterNames(o) {
		if _, err := os.Stat(filepath.Join(dir, "nodes", c+".yaml")); err != nil {
			t.Errorf("cluster %s has no control node: %v", c, err)
		}
	}
	again := t.TempDir()
	if err := Write(again, o); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"clusters/edge-02.yaml", "nodes/cloud-01-h100-0001.yaml"} {
		a, err1 := os.ReadFile(filepath.Join(dir, f))
		b, err2 := os.ReadFile(filepath.Join(again, f))
		if err1 != nil || err2 != nil || string(a) != string(b) {
			t.Errorf("%s differs between two writes (%v, %v)", f, err1, err2)
		}
	}
	if err := Write(dir, o); err == nil {
		t.Error("writing over descriptions succeeded")
	}
	bad := Options{Clusters: 0, Nodes: 0}
	if err := bad.Validate(); err == nil {
		t.Error("empty options validated")
	}
}
