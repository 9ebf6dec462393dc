package resources

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// DefaultMaxPods is the pod capacity of a node, the kubelet's default.
const DefaultMaxPods = 110

// MiBPerGB converts the GB of descriptions into the MiB of the
// nvidia.com/gpu.memory label (descriptions' GB are read as GiB).
const MiBPerGB = 1024

// NodeLabels returns the Kubernetes labels of the node a description
// describes: host name, architecture and OS; the agent layer
// (mlsysops.eu/continuumLayer=node, which the node running a cluster agent
// overrides with cluster); its continuum layer, cluster, datacenter, node
// type, OS, mobility and availability; GPU feature discovery labels for
// its GPUs; FPGA and sensor labels; and its free-form labels. Every value
// is a valid label value.
func NodeLabels(node *mlsysopsv1.MLSysOpsNode) map[string]string {
	spec := &node.Spec
	labels := map[string]string{
		mlsysopsv1.LabelKubeOS:         "linux",
		mlsysopsv1.LabelContinuumLayer: mlsysopsv1.AgentLayerNode,
		mlsysopsv1.LabelMobile:         strconv.FormatBool(spec.Mobile),
	}
	set := func(key, value string) {
		if v := SanitizeLabelValue(value); v != "" {
			labels[key] = v
		}
	}
	// User labels first, so nothing they say can shadow a system label;
	// they live under their own prefix anyway.
	for _, l := range spec.Labels {
		if k, v, ok := UserLabel(l); ok {
			labels[k] = v
		}
	}
	set(mlsysopsv1.LabelHostname, node.Name)
	set(mlsysopsv1.LabelLayer, string(spec.ContinuumLayer))
	set(mlsysopsv1.LabelCluster, spec.ClusterID)
	set(mlsysopsv1.LabelDatacenter, spec.DatacenterID)
	set(mlsysopsv1.LabelAvailability, spec.Availability)
	set(mlsysopsv1.LabelNodeType, spec.Environment.NodeType)
	set(mlsysopsv1.LabelOS, spec.Environment.OS)
	if hw := spec.Hardware; hw != nil {
		if hw.CPU != nil {
			set(mlsysopsv1.LabelArch, hw.CPU.Architecture)
		}
		if g := hw.GPU; g != nil {
			labels[mlsysopsv1.LabelGPUPresent] = "true"
			set(mlsysopsv1.LabelGPUProduct, g.Model)
			labels[mlsysopsv1.LabelGPUCount] = strconv.Itoa(int(gpuInstances(g)))
			if g.Memory > 0 {
				labels[mlsysopsv1.LabelGPUMemory] = strconv.FormatInt(g.Memory*MiBPerGB, 10)
			}
		}
		if f := hw.FPGA; f != nil {
			labels[mlsysopsv1.LabelFPGAPresent] = "true"
			set(mlsysopsv1.LabelFPGAModel, f.Model)
		}
	}
	for _, s := range spec.Sensors {
		for _, kind := range NodeSensorKinds(s) {
			labels[mlsysopsv1.LabelSensorPrefix+kind] = "true"
		}
	}
	return labels
}

// NodeSensorKinds returns the sensor types a node sensor entry describes
// (camera, temperature, ...).
func NodeSensorKinds(s mlsysopsv1.NodeSensor) []string {
	var out []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{"camera", s.Camera != nil}, {"temperature", s.Temperature != nil}, {"accelerometer", s.Accelerometer != nil},
		{"humidity", s.Humidity != nil}, {"sound", s.Sound != nil}, {"co2", s.CO2 != nil},
		{"barometer", s.Barometer != nil}, {"air_quality", s.AirQuality != nil},
	} {
		if k.set {
			out = append(out, k.name)
		}
	}
	return out
}

// NodeCapacity returns the capacity of the node a description describes:
// cpu (cores), memory (the description's GB as GiB), pods (110),
// ephemeral-storage (disk GB as GiB) and nvidia.com/gpu (GPU instances).
// Resources the description does not give are left out.
func NodeCapacity(node *mlsysopsv1.MLSysOpsNode) corev1.ResourceList {
	capacity := corev1.ResourceList{
		corev1.ResourcePods: *resource.NewQuantity(DefaultMaxPods, resource.DecimalSI),
	}
	hw := node.Spec.Hardware
	if hw == nil {
		return capacity
	}
	if hw.CPU != nil && hw.CPU.Cores > 0 {
		capacity[corev1.ResourceCPU] = *resource.NewQuantity(int64(hw.CPU.Cores), resource.DecimalSI)
	}
	if hw.Memory > 0 {
		capacity[corev1.ResourceMemory] = *resource.NewQuantity(hw.Memory<<30, resource.BinarySI)
	}
	if hw.Disk > 0 {
		capacity[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(hw.Disk<<30, resource.BinarySI)
	}
	if hw.GPU != nil {
		capacity[mlsysopsv1.ResourceGPU] = *resource.NewQuantity(int64(gpuInstances(hw.GPU)), resource.DecimalSI)
	}
	return capacity
}

// gpuInstances is the number of GPUs of a node; a GPU described without
// instances is one GPU.
func gpuInstances(g *mlsysopsv1.NodeGPU) int32 {
	if g.Instances > 0 {
		return g.Instances
	}
	return 1
}
