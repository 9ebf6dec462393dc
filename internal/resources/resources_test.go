package resources_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/resources"
)

// nodeBuilder builds node descriptions for tests.
type nodeBuilder struct{ n *mlsysopsv1.MLSysOpsNode }

func makeNode(name string) *nodeBuilder {
	return &nodeBuilder{n: &mlsysopsv1.MLSysOpsNode{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       mlsysopsv1.MLSysOpsNodeSpec{ContinuumLayer: mlsysopsv1.LayerCloud, Hardware: &mlsysopsv1.NodeHardware{}},
	}}
}

func (b *nodeBuilder) Cluster(id string) *nodeBuilder { b.n.Spec.ClusterID = id; return b }
func (b *nodeBuilder) Layer(l mlsysopsv1.ContinuumLayer) *nodeBuilder {
	b.n.Spec.ContinuumLayer = l
	return b
}
func (b *nodeBuilder) CPU(arch string, cores int32) *nodeBuilder {
	b.n.Spec.Hardware.CPU = &mlsysopsv1.NodeCPU{Architecture: arch, Cores: cores}
	return b
}
func (b *nodeBuilder) Memory(gb, diskGB int64) *nodeBuilder {
	b.n.Spec.Hardware.Memory, b.n.Spec.Hardware.Disk = gb, diskGB
	return b
}
func (b *nodeBuilder) GPU(model string, memGB int64, n int32) *nodeBuilder {
	b.n.Spec.Hardware.GPU = &mlsysopsv1.NodeGPU{Model: model, Memory: memGB, Instances: n}
	return b
}
func (b *nodeBuilder) Labels(l ...string) *nodeBuilder { b.n.Spec.Labels = l; return b }
func (b *nodeBuilder) Obj() *mlsysopsv1.MLSysOpsNode   { return b.n }

func TestNodeLabels(t *testing.T) {
	set, err := description.LoadDir("../../descriptions")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		node *mlsysopsv1.MLSysOpsNode
		want map[string]string
	}{
		"jetson from descriptions/": {
			node: set.Node("edge-jetson-1"),
			want: map[string]string{
				"kubernetes.io/hostname":        "edge-jetson-1",
				"kubernetes.io/arch":            "arm64",
				"kubernetes.io/os":              "linux",
				"mlsysops.eu/continuumLayer":    "node",
				"mlsysops.eu/layer":             "edge",
				"mlsysops.eu/cluster":           "edge-1",
				"mlsysops.eu/datacenter":        "volos-edge-1",
				"mlsysops.eu/availability":      "stable",
				"mlsysops.eu/mobile":            "false",
				"mlsysops.eu/node-type":         "native",
				"mlsysops.eu/os":                "ubuntu",
				"mlsysops.eu/sensor.camera":     "true",
				"mlsysops.eu/label.accelerator": "gpu",
				"mlsysops.eu/label.node-type":   "jetson",
				"nvidia.com/gpu.present":        "true",
				"nvidia.com/gpu.product":        "NVIDIA-Jetson-AGX-Orin",
				"nvidia.com/gpu.memory":         "32768",
				"nvidia.com/gpu.count":          "1",
			},
		},
		"FPGA server from descriptions/": {
			node: set.Node("cloud-fpga-1"),
			want: map[string]string{
				"kubernetes.io/hostname":        "cloud-fpga-1",
				"kubernetes.io/arch":            "amd64",
				"kubernetes.io/os":              "linux",
				"mlsysops.eu/continuumLayer":    "node",
				"mlsysops.eu/layer":             "cloud",
				"mlsysops.eu/cluster":           "cloud-1",
				"mlsysops.eu/datacenter":        "athens-dc-1",
				"mlsysops.eu/availability":      "stable",
				"mlsysops.eu/mobile":            "false",
				"mlsysops.eu/node-type":         "bare_metal",
				"mlsysops.eu/os":                "ubuntu",
				"mlsysops.eu/label.accelerator": "fpga",
				"mlsysops.eu/fpga.present":      "true",
				"mlsysops.eu/fpga.model":        "zcu102",
			},
		},
		"sanitized user labels and GPU model": {
			node: makeNode("gpu-1").Cluster("c1").CPU("amd64", 8).GPU("NVIDIA GeForce RTX 4090 (24GB)", 24, 0).
				Labels("gpu", "Rack Position: A/12 ", "owner:").Obj(),
			want: map[string]string{
				"kubernetes.io/hostname":          "gpu-1",
				"kubernetes.io/arch":              "amd64",
				"kubernetes.io/os":                "linux",
				"mlsysops.eu/continuumLayer":      "node",
				"mlsysops.eu/layer":               "cloud",
				"mlsysops.eu/cluster":             "c1",
				"mlsysops.eu/mobile":              "false",
				"mlsysops.eu/label.gpu":           "true",
				"mlsysops.eu/label.Rack-Position": "A-12",
				"mlsysops.eu/label.owner":         "",
				"nvidia.com/gpu.present":          "true",
				"nvidia.com/gpu.product":          "NVIDIA-GeForce-RTX-4090--24GB",
				"nvidia.com/gpu.memory":           "24576",
				"nvidia.com/gpu.count":            "1",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := resources.NodeLabels(tc.node)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NodeLabels (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNodeLabelsAreValid checks every label of every repository node
// against Kubernetes' rules.
func TestNodeLabelsAreValid(t *testing.T) {
	set, err := description.LoadDir("../../descriptions")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range set.Nodes {
		for k, v := range resources.NodeLabels(n) {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Errorf("%s: label key %q: %v", n.Name, k, errs)
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("%s: label %s value %q: %v", n.Name, k, v, errs)
			}
		}
	}
}

func TestNodeCapacity(t *testing.T) {
	set, err := description.LoadDir("../../descriptions")
	if err != nil {
		t.Fatal(err)
	}
	q := resource.MustParse
	cases := map[string]struct {
		node *mlsysopsv1.MLSysOpsNode
		want corev1.ResourceList
	}{
		"H100 server from descriptions/": {
			node: set.Node("cloud-gpu-h100-1"),
			want: corev1.ResourceList{"cpu": q("112"), "memory": q("2Ti"), "pods": q("110"), "ephemeral-storage": q("8000Gi"), "nvidia.com/gpu": q("8")},
		},
		"Raspberry Pi from descriptions/ (memory and disk written as strings)": {
			node: set.Node("far-edge-rpi-1"),
			want: corev1.ResourceList{"cpu": q("4"), "memory": q("4Gi"), "pods": q("110"), "ephemeral-storage": q("32Gi")},
		},
		"GPU without instances is one GPU": {
			node: makeNode("n").CPU("amd64", 2).GPU("k80", 12, 0).Obj(),
			want: corev1.ResourceList{"cpu": q("2"), "pods": q("110"), "nvidia.com/gpu": q("1")},
		},
		"no hardware": {
			node: &mlsysopsv1.MLSysOpsNode{ObjectMeta: metav1.ObjectMeta{Name: "bare"}},
			want: corev1.ResourceList{"pods": q("110")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := resources.NodeCapacity(tc.node)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("NodeCapacity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSanitizeLabelValue(t *testing.T) {
	cases := map[string]string{
		"NVIDIA-H100-80GB-HBM3": "NVIDIA-H100-80GB-HBM3",
		"Intel Xeon Gold 6338":  "Intel-Xeon-Gold-6338",
		"  spaced  ":            "spaced",
		"-_.edge._-":            "edge",
		"a/b:c@d":               "a-b-c-d",
		"???":                   "",
		"":                      "",
		// Cut to 63 characters, and never end on a separator.
		strings.Repeat("abcdefghij-", 5) + "abcdefghij-end": strings.Repeat("abcdefghij-", 5) + "abcdefgh",
		strings.Repeat("abcdefghij-", 5) + "abcdefg-xyz":    strings.Repeat("abcdefghij-", 5) + "abcdefg",
	}
	for in, want := range cases {
		got := resources.SanitizeLabelValue(in)
		if got != want {
			t.Errorf("SanitizeLabelValue(%q) = %q, want %q", in, got, want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("SanitizeLabelValue(%q) = %q is not a label value: %v", in, got, errs)
		}
	}
}

func TestUserLabel(t *testing.T) {
	cases := map[string]struct {
		key, value string
		ok         bool
	}{
		"node-type:rpi":   {"mlsysops.eu/label.node-type", "rpi", true},
		"gpu":             {"mlsysops.eu/label.gpu", "true", true},
		"zone: a:b":       {"mlsysops.eu/label.zone", "a-b", true},
		"owner:":          {"mlsysops.eu/label.owner", "", true},
		":value":          {"", "", false},
		"!!!":             {"", "", false},
		"Rack Position:3": {"mlsysops.eu/label.Rack-Position", "3", true},
	}
	for in, want := range cases {
		k, v, ok := resources.UserLabel(in)
		if k != want.key || v != want.value || ok != want.ok {
			t.Errorf("UserLabel(%q) = %q, %q, %v; want %q, %q, %v", in, k, v, ok, want.key, want.value, want.ok)
		}
		if ok {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Errorf("UserLabel(%q) key %q: %v", in, k, errs)
			}
		}
	}
}

func loadApp(t *testing.T, path string) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	obj, err := description.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*mlsysopsv1.MLSysOpsApp)
}

func component(app *mlsysopsv1.MLSysOpsApp, name string) *mlsysopsv1.Component {
	for i := range app.Spec.Components {
		if app.Spec.Components[i].Metadata.Name == name {
			return &app.Spec.Components[i]
		}
	}
	return nil
}

func TestContainerResources(t *testing.T) {
	llm := loadApp(t, "../../examples/apps/gpu-inference.yaml")
	q := resource.MustParse
	cases := map[string]struct {
		pr   *mlsysopsv1.PlatformRequirements
		want corev1.ResourceRequirements
	}{
		"GPU inference server": {
			pr: component(llm, "llm-server").Containers[0].PlatformRequirements,
			want: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": q("8"), "memory": q("64Gi"), "nvidia.com/gpu": q("1")},
				Limits:   corev1.ResourceList{"cpu": q("16"), "memory": q("96Gi"), "nvidia.com/gpu": q("1")},
			},
		},
		"GPU by model only is one GPU, requested and limited": {
			pr: &mlsysopsv1.PlatformRequirements{GPU: &mlsysopsv1.GPURequirements{Model: "k80"}},
			want: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"nvidia.com/gpu": q("1")},
				Limits:   corev1.ResourceList{"nvidia.com/gpu": q("1")},
			},
		},
		"GPU requests only": {
			pr: &mlsysopsv1.PlatformRequirements{GPU: &mlsysopsv1.GPURequirements{Requests: 2}},
			want: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"nvidia.com/gpu": q("2")},
				Limits:   corev1.ResourceList{"nvidia.com/gpu": q("2")},
			},
		},
		"nothing": {pr: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := resources.ContainerResources(tc.pr)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("ContainerResources (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeSelectorRequirements(t *testing.T) {
	llm := loadApp(t, "../../examples/apps/gpu-inference.yaml")
	edge := loadApp(t, "../../examples/apps/edge-camera-arm64.yaml")
	fpga := loadApp(t, "../../examples/apps/fpga-optical-flow.yaml")
	test := loadApp(t, "../../examples/apps/test-application.yaml")
	in := func(key string, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	cases := map[string]struct {
		app  *mlsysopsv1.MLSysOpsApp
		comp string
		want []corev1.NodeSelectorRequirement
	}{
		"H100 inference": {
			app: llm, comp: "llm-server",
			want: []corev1.NodeSelectorRequirement{
				in("kubernetes.io/arch", "amd64"),
				in("mlsysops.eu/label.accelerator", "gpu"),
				in("mlsysops.eu/layer", "cloud"),
				{Key: "nvidia.com/gpu.memory", Operator: corev1.NodeSelectorOpGt, Values: []string{"81919"}},
				in("nvidia.com/gpu.present", "true"),
				in("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
			},
		},
		"two acceptable layers": {
			app: llm, comp: "gateway",
			want: []corev1.NodeSelectorRequirement{in("mlsysops.eu/layer", "cloud", "edge_infrastructure")},
		},
		"arm64 camera on a mobile far-edge node": {
			app: edge, comp: "detector",
			want: []corev1.NodeSelectorRequirement{
				in("kubernetes.io/arch", "arm64"),
				in("mlsysops.eu/label.node-type", "rpi"),
				in("mlsysops.eu/layer", "far_edge"),
				in("mlsysops.eu/mobile", "true"),
				in("mlsysops.eu/os", "ubuntu"),
				in("mlsysops.eu/sensor.camera", "true"),
			},
		},
		"single_node placement overrides and FPGA": {
			app: fpga, comp: "optical-flow",
			want: []corev1.NodeSelectorRequirement{
				in("kubernetes.io/arch", "amd64"),
				in("mlsysops.eu/fpga.model", "zcu102"),
				in("mlsysops.eu/fpga.present", "true"),
				in("mlsysops.eu/label.accelerator", "fpga"),
				in("mlsysops.eu/layer", "cloud"),
				in("mlsysops.eu/node-type", "bare_metal"),
			},
		},
		"pinned to a node": {
			app: test, comp: "server-app",
			want: []corev1.NodeSelectorRequirement{in("kubernetes.io/hostname", "edge-t4-1")},
		},
		"anywhere": {app: test, comp: "client-app"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			comp := component(tc.app, tc.comp)
			got := resources.NodeSelectorRequirements(&tc.app.Spec, comp)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("NodeSelectorRequirements (-want +got):\n%s", diff)
			}
			aff := resources.NodeAffinity(&tc.app.Spec, comp)
			if (aff == nil) != (len(tc.want) == 0) {
				t.Fatalf("NodeAffinity = %v, want nil only when there are no requirements", aff)
			}
			if aff != nil {
				terms := aff.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				if len(terms) != 1 || !cmp.Equal(terms[0].MatchExpressions, got) {
					t.Errorf("NodeAffinity terms = %v, want one term with the requirements", terms)
				}
			}
		})
	}
}

// TestPlacementMatchesOwnNodes checks that each example component's
// requirements are met by the labels of at least one repository node, so
// that labels and requirements speak the same language.
func TestPlacementMatchesOwnNodes(t *testing.T) {
	set, err := description.LoadDir("../../descriptions")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"gpu-inference.yaml", "edge-camera-arm64.yaml", "fpga-optical-flow.yaml", "test-application.yaml"} {
		app := loadApp(t, "../../examples/apps/"+file)
		for i := range app.Spec.Components {
			comp := &app.Spec.Components[i]
			reqs := resources.NodeSelectorRequirements(&app.Spec, comp)
			var hosts []string
			for _, n := range set.Nodes {
				if matches(resources.NodeLabels(n), reqs) {
					hosts = append(hosts, n.Name)
				}
			}
			if len(hosts) == 0 {
				t.Errorf("%s: component %s matches no node of descriptions/ (requirements %v)", file, comp.Metadata.Name, reqs)
			}
		}
	}
}

func matches(labels map[string]string, reqs []corev1.NodeSelectorRequirement) bool {
	for _, r := range reqs {
		v, ok := labels[r.Key]
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			found := false
			for _, want := range r.Values {
				found = found || (ok && v == want)
			}
			if !found {
				return false
			}
		case corev1.NodeSelectorOpGt:
			have, err1 := resource.ParseQuantity(v)
			limit, err2 := resource.ParseQuantity(r.Values[0])
			if !ok || err1 != nil || err2 != nil || have.Cmp(limit) <= 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func TestRuntimeClassName(t *testing.T) {
	cases := map[string]*string{"": nil, "default": nil, "nvidia": ptr("nvidia"), "kata-fc": ptr("kata-fc")}
	for in, want := range cases {
		got := resources.RuntimeClassName(&mlsysopsv1.Component{RuntimeClassName: in})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("RuntimeClassName(%q) (-want +got):\n%s", in, diff)
		}
	}
}

func ptr(s string) *string { return &s }
