// Package gen writes system descriptions of a continuum of any size: a
// continuum of clusters of a realistic mix of nodes (cloud data centres
// with CPU servers, GPU servers of four models and a few FPGAs; edge sites
// with small servers, Jetsons and T4s; far-edge sites of Raspberry Pis and
// small boards), so the testbed can run at the scale a continuum reaches
// (`go run ./cmd/testbed gen-descriptions`). The same options give the
// same files.
package gen

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// Options size the continuum.
type Options struct {
	// Clusters is the number of member clusters.
	Clusters int
	// Nodes is the number of nodes of each cluster, its control node (the
	// node named after the cluster, which hosts the cluster agent)
	// included.
	Nodes int
	// Continuum names the continuum (and its agent's host).
	Continuum string
	// Seed picks the mix; the same seed gives the same descriptions.
	Seed uint64
}

// Validate reports every problem with the options.
func (o *Options) Validate() error {
	var errs []error
	if o.Clusters < 1 || o.Clusters > 50 {
		errs = append(errs, fmt.Errorf("clusters: %d, want 1 to 50 (the testbed runs at most 50)", o.Clusters))
	}
	if o.Nodes < 1 || o.Nodes > 5000 {
		errs = append(errs, fmt.Errorf("nodes: %d per cluster, want 1 to 5000", o.Nodes))
	}
	if o.Continuum == "" {
		errs = append(errs, errors.New("continuum: must not be empty"))
	}
	return errors.Join(errs...)
}

// kind is a kind of node and how often it appears in a cluster of a
// given type.
type kind struct {
	Name   string
	Weight int
	Layer  string
	Arch   string
	Cores  int
	MemGB  int
	DiskGB int
	Freq   [2]string
	Perf   int
	CPU    string
	GPU    *gpu
	FPGA   string
	Labels []string
	NodeTy string
}

type gpu struct {
	Model     string
	MemGB     int
	Instances int
	Perf      int
}

// The mixes of the three types of cluster. Weights are per thousand.
var mixes = map[string][]kind{
	"cloud": {
		{Name: "cpu", Weight: 700, Layer: "cloud", Arch: "amd64", Cores: 64, MemGB: 256, DiskGB: 2000, Freq: [2]string{"2.0", "3.5"}, Perf: 2500, CPU: "AMD EPYC 7543", NodeTy: "bare_metal"},
		{Name: "arm", Weight: 80, Layer: "cloud", Arch: "arm64", Cores: 64, MemGB: 128, DiskGB: 1000, Freq: [2]string{"2.0", "2.6"}, Perf: 2000, CPU: "AWS Graviton3", NodeTy: "virtualized"},
		{Name: "h100", Weight: 60, Layer: "cloud", Arch: "amd64", Cores: 112, MemGB: 2048, DiskGB: 8000, Freq: [2]string{"2.0", "3.8"}, Perf: 4000, CPU: "Intel Xeon Platinum 8480+", NodeTy: "bare_metal",
			GPU: &gpu{Model: "NVIDIA-H100-80GB-HBM3", MemGB: 80, Instances: 8, Perf: 989}, Labels: []string{"accelerator:gpu", "gpu-class:training"}},
		{Name: "a100", Weight: 80, Layer: "cloud", Arch: "amd64", Cores: 64, MemGB: 1024, DiskGB: 4000, Freq: [2]string{"2.25", "3.4"}, Perf: 3000, CPU: "AMD EPYC 7763", NodeTy: "bare_metal",
			GPU: &gpu{Model: "NVIDIA-A100-SXM4-80GB", MemGB: 80, Instances: 4, Perf: 312}, Labels: []string{"accelerator:gpu", "gpu-class:training"}},
		{Name: "l4", Weight: 70, Layer: "cloud", Arch: "amd64", Cores: 32, MemGB: 256, DiskGB: 2000, Freq: [2]string{"2.4", "3.5"}, Perf: 2200, CPU: "Intel Xeon Gold 6338", NodeTy: "virtualized",
			GPU: &gpu{Model: "NVIDIA-L4", MemGB: 24, Instances: 2, Perf: 121}, Labels: []string{"accelerator:gpu", "gpu-class:inference"}},
		{Name: "fpga", Weight: 10, Layer: "cloud", Arch: "amd64", Cores: 32, MemGB: 128, DiskGB: 1000, Freq: [2]string{"2.4", "3.4"}, Perf: 1500, CPU: "Intel Xeon Silver 4314", NodeTy: "bare_metal",
			FPGA: "zcu102", Labels: []string{"accelerator:fpga"}},
	},
	"edge": {
		{Name: "server", Weight: 400, Layer: "edge_infrastructure", Arch: "amd64", Cores: 16, MemGB: 64, DiskGB: 1000, Freq: [2]string{"3.0", "4.6"}, Perf: 900, CPU: "Intel Xeon E-2388G", NodeTy: "native"},
		{Name: "t4", Weight: 150, Layer: "edge_infrastructure", Arch: "amd64", Cores: 8, MemGB: 64, DiskGB: 1000, Freq: [2]string{"3.7", "5.0"}, Perf: 700, CPU: "Intel Xeon E-2288G", NodeTy: "native",
			GPU: &gpu{Model: "Tesla-T4", MemGB: 16, Instances: 1, Perf: 65}, Labels: []string{"accelerator:gpu", "gpu-class:inference"}},
		{Name: "jetson", Weight: 250, Layer: "edge", Arch: "arm64", Cores: 12, MemGB: 32, DiskGB: 64, Freq: [2]string{"1.2", "2.2"}, Perf: 300, CPU: "ARM Cortex-A78AE", NodeTy: "native",
			GPU: &gpu{Model: "NVIDIA-Jetson-AGX-Orin", MemGB: 32, Instances: 1, Perf: 275}, Labels: []string{"accelerator:gpu", "node-type:jetson"}},
		{Name: "arm", Weight: 200, Layer: "edge", Arch: "arm64", Cores: 8, MemGB: 16, DiskGB: 256, Freq: [2]string{"1.8", "2.4"}, Perf: 250, CPU: "ARM Neoverse N1", NodeTy: "native"},
	},
	"far-edge": {
		{Name: "rpi", Weight: 600, Layer: "far_edge", Arch: "arm64", Cores: 4, MemGB: 4, DiskGB: 32, Freq: [2]string{"0.6", "1.5"}, Perf: 50, CPU: "ARM Cortex-A72", NodeTy: "native",
			Labels: []string{"node-type:rpi"}},
		{Name: "orin-nano", Weight: 250, Layer: "far_edge", Arch: "arm64", Cores: 6, MemGB: 8, DiskGB: 64, Freq: [2]string{"0.8", "1.5"}, Perf: 120, CPU: "ARM Cortex-A78AE", NodeTy: "native",
			GPU: &gpu{Model: "NVIDIA-Jetson-Orin-Nano", MemGB: 8, Instances: 1, Perf: 40}, Labels: []string{"accelerator:gpu", "node-type:jetson"}},
		{Name: "nuc", Weight: 150, Layer: "far_edge", Arch: "amd64", Cores: 4, MemGB: 16, DiskGB: 256, Freq: [2]string{"1.5", "4.2"}, Perf: 200, CPU: "Intel Core i5-1135G7", NodeTy: "native"},
	},
}

// clusterType gives the i-th cluster's type: four in ten clouds, four
// edge sites, two far-edge sites.
func clusterType(i int) string {
	switch i % 10 {
	case 0, 3, 6, 8:
		return "cloud"
	case 1, 4, 7, 9:
		return "edge"
	}
	return "far-edge"
}

// ClusterNames returns the names of the clusters Write writes, in order.
func ClusterNames(o Options) []string {
	out := make([]string, o.Clusters)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", clusterType(i), i+1)
	}
	return out
}

type nodeDoc struct {
	Name, Cluster, Datacenter string
	Kind                      kind
	Mobile                    bool
	Lon, Lat                  string
}

// Write writes continuum/, clusters/ and nodes/ into dir, which must not
// hold descriptions already (it may exist).
func Write(dir string, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	for _, sub := range []string{"continuum", "clusters", "nodes"} {
		p := filepath.Join(dir, sub)
		if entries, err := os.ReadDir(p); err == nil && len(entries) > 0 {
			return fmt.Errorf("%s already holds descriptions: write into an empty folder", p)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	r := rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed))
	names := ClusterNames(o)
	var b strings.Builder
	if err := continuumTmpl.Execute(&b, map[string]any{"Name": o.Continuum, "Clusters": names}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "continuum", o.Continuum+".yaml"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	for i, cluster := range names {
		ty := clusterType(i)
		dc := cluster + "-dc"
		lon, lat := fmt.Sprintf("%.4f", 20+r.Float64()*5), fmt.Sprintf("%.4f", 36+r.Float64()*5)
		nodes := []nodeDoc{{Name: cluster, Cluster: cluster, Datacenter: dc, Lon: lon, Lat: lat, Kind: kind{
			Name: "control", Layer: mixes[ty][0].Layer, Arch: "amd64", Cores: 16, MemGB: 64, DiskGB: 500,
			Freq: [2]string{"2.0", "3.2"}, Perf: 1200, CPU: "Intel Xeon Gold 6338", NodeTy: "virtualized", Labels: []string{"node-role:control"},
		}}}
		counts := map[string]int{}
		for len(nodes) < o.Nodes {
			k := pick(r, mixes[ty])
			counts[k.Name]++
			nodes = append(nodes, nodeDoc{Name: fmt.Sprintf("%s-%s-%04d", cluster, k.Name, counts[k.Name]), Cluster: cluster, Datacenter: dc,
				Kind: k, Mobile: k.Layer == "far_edge" && r.IntN(4) == 0, Lon: lon, Lat: lat})
		}
		b.Reset()
		if err := clusterTmpl.Execute(&b, map[string]any{"Name": cluster, "Type": ty, "Datacenter": dc, "Nodes": nodes}); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "clusters", cluster+".yaml"), []byte(b.String()), 0o644); err != nil {
			return err
		}
		for _, n := range nodes {
			b.Reset()
			if err := nodeTmpl.Execute(&b, n); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "nodes", n.Name+".yaml"), []byte(b.String()), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func pick(r *rand.Rand, ks []kind) kind {
	total := 0
	for _, k := range ks {
		total += k.Weight
	}
	x := r.IntN(total)
	for _, k := range ks {
		if x < k.Weight {
			return k
		}
		x -= k.Weight
	}
	return ks[len(ks)-1]
}

var funcs = template.FuncMap{
	"quote": func(ss []string) string {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = fmt.Sprintf("%q", s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	},
}

var continuumTmpl = template.Must(template.New("continuum").Funcs(funcs).Parse(`# Generated by the MLSysOps testbed (gen-descriptions).
MLSysOpsContinuum:
  continuum_id: {{.Name}}
  clusters:
{{- range .Clusters}}
    - {{.}}
{{- end}}
`))

var clusterTmpl = template.Must(template.New("cluster").Parse(`# Generated by the MLSysOps testbed (gen-descriptions): a {{.Type}} cluster.
MLSysOpsCluster:
  cluster_id: {{.Name}}
  datacenter_id: {{.Datacenter}}
  nodes:
{{- range .Nodes}}
    - {{.Name}}
{{- end}}
`))

var nodeTmpl = template.Must(template.New("node").Funcs(funcs).Parse(`# Generated by the MLSysOps testbed (gen-descriptions): a {{.Kind.Name}} node.
MLSysOpsNode:
  name: {{.Name}}
  cluster_id: {{.Cluster}}
  datacenter_id: {{.Datacenter}}
  continuum_layer: {{.Kind.Layer}}
  availability: stable
  mobile: {{.Mobile}}
  location: [{{.Lon}}, {{.Lat}}]
{{- if .Kind.Labels}}
  labels: {{quote .Kind.Labels}}
{{- end}}
  environment:
    node_type: {{.Kind.NodeTy}}
    os: ubuntu
    container_runtime: [containerd]
  hardware:
    cpu:
      model: {{.Kind.CPU}}
      architecture: {{.Kind.Arch}}
      cores: {{.Kind.Cores}}
      frequency: [{{index .Kind.Freq 0}}, {{index .Kind.Freq 1}}]
      performance_indicator: {{.Kind.Perf}}
    memory: {{.Kind.MemGB}}
    disk: "{{.Kind.DiskGB}}"
{{- with .Kind.GPU}}
    gpu:
      model: {{.Model}}
      memory: {{.MemGB}}
      instances: {{.Instances}}
      performance_indicator: {{.Perf}}
{{- end}}
{{- with .Kind.FPGA}}
    fpga:
      model: {{.}}
      memory: 4
      performance_indicator: 100
{{- end}}
  network_resources:
    basic_interface:
      name: ethernet
      interface_name: eth0
      application_traffic_permission: true
  permitted_actions: [cpu_frequency]
`))

// NodeDescription is the description of one node, named name, of cluster,
// of a kind the seed picks from the mix of a type of cluster ("cloud",
// "edge" or "far-edge"): for adding generated nodes to hand-written
// descriptions.
func NodeDescription(name, cluster, clusterType string, seed uint64) ([]byte, error) {
	mix, ok := mixes[clusterType]
	if !ok {
		return nil, fmt.Errorf("cluster type %q: want cloud, edge or far-edge", clusterType)
	}
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var b strings.Builder
	err := nodeTmpl.Execute(&b, nodeDoc{Name: name, Cluster: cluster, Datacenter: cluster + "-dc", Kind: pick(r, mix), Lon: "23.7275", Lat: "37.9838"})
	return []byte(b.String()), err
}
