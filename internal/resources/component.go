package resources

import (
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// GPUCount is the number of GPUs a GPU requirement asks for: limits, else
// requests, else one (a gpu block naming only a model asks for one GPU).
func GPUCount(g *mlsysopsv1.GPURequirements) int64 {
	switch {
	case g == nil:
		return 0
	case g.Limits > 0:
		return int64(g.Limits)
	case g.Requests > 0:
		return int64(g.Requests)
	default:
		return 1
	}
}

// ContainerResources converts a container's platform requirements into
// Kubernetes resource requirements: cpu and memory requests and limits as
// given, and nvidia.com/gpu as both request and limit (Kubernetes requires
// them equal for extended resources). It returns an empty value for nil.
func ContainerResources(pr *mlsysopsv1.PlatformRequirements) corev1.ResourceRequirements {
	var rr corev1.ResourceRequirements
	if pr == nil {
		return rr
	}
	put := func(list *corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity) {
		if q == nil {
			return
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[name] = q.DeepCopy()
	}
	if pr.CPU != nil {
		put(&rr.Requests, corev1.ResourceCPU, pr.CPU.Requests)
		put(&rr.Limits, corev1.ResourceCPU, pr.CPU.Limits)
	}
	if pr.Memory != nil {
		put(&rr.Requests, corev1.ResourceMemory, pr.Memory.Requests)
		put(&rr.Limits, corev1.ResourceMemory, pr.Memory.Limits)
	}
	if pr.GPU != nil {
		n := resource.NewQuantity(GPUCount(pr.GPU), resource.DecimalSI)
		put(&rr.Requests, mlsysopsv1.ResourceGPU, n)
		put(&rr.Limits, mlsysopsv1.ResourceGPU, n)
	}
	return rr
}

// EffectivePlacement returns the node placement that applies to comp: the
// single_node group naming it, which overrides the component's own
// node_placement, else its node_placement (possibly nil).
func EffectivePlacement(spec *mlsysopsv1.MLSysOpsAppSpec, comp *mlsysopsv1.Component) *mlsysopsv1.NodePlacement {
	if spec != nil {
		for i := range spec.SingleNode {
			for _, name := range spec.SingleNode[i].Components {
				if name == comp.Metadata.Name {
					return &spec.SingleNode[i].NodePlacement
				}
			}
		}
	}
	return comp.NodePlacement
}

// NodeSelectorRequirements returns what a node must satisfy to host comp,
// as node selector requirements on the labels NodeLabels sets: host name
// (node_placement.node), continuum layer ("*" means any), free-form
// labels, mobility, OS and node type, CPU architecture (the architectures
// every container accepts), GPU presence, product and memory, FPGA
// presence and model, and sensors. They are sorted by key; all must hold.
func NodeSelectorRequirements(spec *mlsysopsv1.MLSysOpsAppSpec, comp *mlsysopsv1.Component) []corev1.NodeSelectorRequirement {
	req := map[string]corev1.NodeSelectorRequirement{}
	in := func(key string, values ...string) {
		var clean []string
		seen := map[string]bool{}
		for _, v := range values {
			if s := SanitizeLabelValue(v); s != "" && !seen[s] {
				seen[s] = true
				clean = append(clean, s)
			}
		}
		if len(clean) == 0 {
			return
		}
		sort.Strings(clean)
		req[key] = corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: clean}
	}

	if np := EffectivePlacement(spec, comp); np != nil {
		if np.Node != "" {
			in(mlsysopsv1.LabelHostname, np.Node)
		}
		var layers []string
		anyLayer := false
		for _, l := range np.ContinuumLayer {
			if l == mlsysopsv1.LayerAny {
				anyLayer = true
			}
			layers = append(layers, string(l))
		}
		if !anyLayer {
			in(mlsysopsv1.LabelLayer, layers...)
		}
		for _, l := range np.Labels {
			if k, v, ok := UserLabel(l); ok {
				req[k] = corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v}}
			}
		}
		if np.Mobile {
			in(mlsysopsv1.LabelMobile, "true")
		}
	}
	if comp.OS != "" {
		in(mlsysopsv1.LabelOS, comp.OS)
	}
	if comp.NodeType != "" {
		in(mlsysopsv1.LabelNodeType, comp.NodeType)
	}
	if archs := Architectures(comp); len(archs) > 0 {
		in(mlsysopsv1.LabelArch, archs...)
	}
	var (
		gpuModels, fpgaModels []string
		gpu, fpga             bool
		gpuMemGB              int64
	)
	for _, c := range comp.Containers {
		pr := c.PlatformRequirements
		if pr == nil {
			continue
		}
		if g := pr.GPU; g != nil {
			gpu = true
			if g.Model != "" {
				gpuModels = append(gpuModels, g.Model)
			}
			gpuMemGB = max(gpuMemGB, g.Memory)
		}
		if f := pr.FPGA; f != nil {
			fpga = true
			if f.Model != "" {
				fpgaModels = append(fpgaModels, f.Model)
			}
		}
	}
	if gpu {
		in(mlsysopsv1.LabelGPUPresent, "true")
		in(mlsysopsv1.LabelGPUProduct, gpuModels...)
		if gpuMemGB > 0 {
			req[mlsysopsv1.LabelGPUMemory] = corev1.NodeSelectorRequirement{Key: mlsysopsv1.LabelGPUMemory,
				Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.FormatInt(gpuMemGB*MiBPerGB-1, 10)}}
		}
	}
	if fpga {
		in(mlsysopsv1.LabelFPGAPresent, "true")
		in(mlsysopsv1.LabelFPGAModel, fpgaModels...)
	}
	for _, s := range comp.Sensors {
		for _, kind := range AppSensorKinds(s) {
			in(mlsysopsv1.LabelSensorPrefix+kind, "true")
		}
	}

	keys := make([]string, 0, len(req))
	for k := range req {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]corev1.NodeSelectorRequirement, 0, len(keys))
	for _, k := range keys {
		out = append(out, req[k])
	}
	return out
}

// NodeAffinity returns the required node affinity that places comp on a
// node matching NodeSelectorRequirements, or nil when comp may run
// anywhere.
func NodeAffinity(spec *mlsysopsv1.MLSysOpsAppSpec, comp *mlsysopsv1.Component) *corev1.NodeAffinity {
	reqs := NodeSelectorRequirements(spec, comp)
	if len(reqs) == 0 {
		return nil
	}
	return &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}},
		},
	}
}

// Architectures returns the CPU architectures every container of comp
// accepts (the intersection of the lists the containers give), sorted; nil
// when no container restricts it. An empty non-nil result means the
// containers disagree.
func Architectures(comp *mlsysopsv1.Component) []string {
	var allowed map[string]bool
	for _, c := range comp.Containers {
		pr := c.PlatformRequirements
		if pr == nil || pr.CPU == nil || len(pr.CPU.Architecture) == 0 {
			continue
		}
		mine := map[string]bool{}
		for _, a := range pr.CPU.Architecture {
			if allowed == nil || allowed[a] {
				mine[a] = true
			}
		}
		allowed = mine
	}
	if allowed == nil {
		return nil
	}
	out := make([]string, 0, len(allowed))
	for a := range allowed {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// AppSensorKinds returns the sensor types an application sensor entry asks
// for.
func AppSensorKinds(s mlsysopsv1.AppSensor) []string {
	var out []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{"camera", s.Camera != nil}, {"temperature", s.Temperature != nil}, {"accelerometer", s.Accelerometer != nil},
		{"barometer", s.Barometer != nil}, {"air_quality", s.AirQuality != nil},
	} {
		if k.set {
			out = append(out, k.name)
		}
	}
	return out
}

// RuntimeClassName returns the runtime class a component asks for, or nil
// for the cluster default (unset or "default").
func RuntimeClassName(comp *mlsysopsv1.Component) *string {
	if comp.RuntimeClassName == "" || comp.RuntimeClassName == "default" {
		return nil
	}
	rc := comp.RuntimeClassName
	return &rc
}

// Tolerations returns the tolerations a component's pods carry: a
// component that asks for GPUs tolerates the taints GPU nodes carry on
// the GPU resource's key (nvidia.com/gpu=present:NoSchedule from the
// NVIDIA GPU operator, or any value), as Kubernetes' ExtendedResourceToleration
// admission plugin would add. Placement and the pods agree on it.
func Tolerations(comp *mlsysopsv1.Component) []corev1.Toleration {
	for _, c := range comp.Containers {
		if pr := c.PlatformRequirements; pr != nil && pr.GPU != nil && GPUCount(pr.GPU) > 0 {
			return []corev1.Toleration{{Key: string(mlsysopsv1.ResourceGPU), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}
	}
	return nil
}
