package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// NodeWrapper builds placement.Node fixtures fluently.
type NodeWrapper struct{ Node }

func MakeNode(name string) *NodeWrapper {
	return &NodeWrapper{Node{Node: &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			mlsysopsv1.LabelHostname: name, mlsysopsv1.LabelArch: "amd64", mlsysopsv1.LabelKubeOS: "linux",
			mlsysopsv1.LabelLayer: "cloud",
		}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
				corev1.ResourcePods: resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}, Requested: corev1.ResourceList{}}}
}

func (w *NodeWrapper) GPU(product string, count int64) *NodeWrapper {
	w.Node.Node.Labels[mlsysopsv1.LabelGPUPresent] = "true"
	w.Node.Node.Labels[mlsysopsv1.LabelGPUProduct] = product
	w.Node.Node.Labels[mlsysopsv1.LabelGPUMemory] = "81920"
	w.Node.Node.Status.Allocatable[mlsysopsv1.ResourceGPU] = *resource.NewQuantity(count, resource.DecimalSI)
	return w
}

// GPUMemory sets the memory of one GPU, in MiB.
func (w *NodeWrapper) GPUMemory(mib string) *NodeWrapper {
	w.Node.Node.Labels[mlsysopsv1.LabelGPUMemory] = mib
	return w
}

func (w *NodeWrapper) FPGA(model string) *NodeWrapper {
	w.Node.Node.Labels[mlsysopsv1.LabelFPGAPresent] = "true"
	w.Node.Node.Labels[mlsysopsv1.LabelFPGAModel] = model
	return w
}

func (w *NodeWrapper) Layer(l string) *NodeWrapper {
	w.Node.Node.Labels[mlsysopsv1.LabelLayer] = l
	return w
}
func (w *NodeWrapper) Arch(a string) *NodeWrapper {
	w.Node.Node.Labels[mlsysopsv1.LabelArch] = a
	return w
}
func (w *NodeWrapper) Label(k, v string) *NodeWrapper {
	w.Node.Node.Labels[k] = v
	return w
}

func (w *NodeWrapper) CPU(q string) *NodeWrapper {
	w.Node.Node.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(q)
	return w
}

func (w *NodeWrapper) Used(name corev1.ResourceName, q string) *NodeWrapper {
	w.Requested[name] = resource.MustParse(q)
	return w
}

func (w *NodeWrapper) NotReady() *NodeWrapper {
	w.Node.Node.Status.Conditions[0].Status = corev1.ConditionFalse
	return w
}

func (w *NodeWrapper) MaxFreqGHz(f float64) *NodeWrapper {
	w.Description = &mlsysopsv1.MLSysOpsNodeSpec{Hardware: &mlsysopsv1.NodeHardware{CPU: &mlsysopsv1.NodeCPU{Frequency: []int64{int64(f * 1e9)}}}}
	return w
}

// Taint adds a taint.
func (w *NodeWrapper) Taint(key, value string, effect corev1.TaintEffect) *NodeWrapper {
	w.Node.Node.Spec.Taints = append(w.Node.Node.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

func (w *NodeWrapper) Obj() Node { return w.Node }

// CompWrapper builds components fluently.
type CompWrapper struct{ mlsysopsv1.Component }

func MakeComp(name string) *CompWrapper {
	return &CompWrapper{mlsysopsv1.Component{
		Metadata:   mlsysopsv1.ComponentMetadata{Name: name},
		Containers: []mlsysopsv1.Container{{Image: "registry.example/" + name + ":1", PlatformRequirements: &mlsysopsv1.PlatformRequirements{}}},
	}}
}

func (w *CompWrapper) pr() *mlsysopsv1.PlatformRequirements {
	return w.Containers[0].PlatformRequirements
}

func (w *CompWrapper) GPU(model string, n int32) *CompWrapper {
	w.pr().GPU = &mlsysopsv1.GPURequirements{Model: model, Requests: n, Limits: n}
	return w
}

// GPUMemoryGB asks for GPUs with at least gb GB of memory.
func (w *CompWrapper) GPUMemoryGB(gb int64) *CompWrapper {
	w.pr().GPU.Memory = gb
	return w
}

func (w *CompWrapper) FPGA(model string) *CompWrapper {
	w.pr().FPGA = &mlsysopsv1.FPGARequirements{Model: model}
	return w
}

func (w *CompWrapper) CPU(q string) *CompWrapper {
	qq := resource.MustParse(q)
	if w.pr().CPU == nil {
		w.pr().CPU = &mlsysopsv1.CPURequirements{}
	}
	w.pr().CPU.Requests = &qq
	return w
}

func (w *CompWrapper) Arch(a ...string) *CompWrapper {
	if w.pr().CPU == nil {
		w.pr().CPU = &mlsysopsv1.CPURequirements{}
	}
	w.pr().CPU.Architecture = a
	return w
}

func (w *CompWrapper) FreqGHz(f float64) *CompWrapper {
	if w.pr().CPU == nil {
		w.pr().CPU = &mlsysopsv1.CPURequirements{}
	}
	w.pr().CPU.Frequency = int64(f * 1e9)
	return w
}

func (w *CompWrapper) Layers(l ...mlsysopsv1.ContinuumLayer) *CompWrapper {
	w.np().ContinuumLayer = l
	return w
}

func (w *CompWrapper) Replicas(n int32) *CompWrapper {
	w.np().Scaling = &mlsysopsv1.Scaling{ScalingMode: "manual", Instances: n}
	return w
}

func (w *CompWrapper) OnNode(n string) *CompWrapper { w.np().Node = n; return w }

func (w *CompWrapper) np() *mlsysopsv1.NodePlacement {
	if w.NodePlacement == nil {
		w.NodePlacement = &mlsysopsv1.NodePlacement{}
	}
	return w.NodePlacement
}

func (w *CompWrapper) Obj() mlsysopsv1.Component { return w.Component }

func app(comps ...mlsysopsv1.Component) *mlsysopsv1.MLSysOpsAppSpec {
	return &mlsysopsv1.MLSysOpsAppSpec{Name: "app", Components: comps}
}

// manyNodes makes n nodes of mixed kinds, for benchmarks.
func manyNodes(prefix string, n int) []Node {
	out := make([]Node, 0, n)
	for i := 0; i < n; i++ {
		w := MakeNode(fmt.Sprintf("%s-%05d", prefix, i))
		switch i % 10 {
		case 0:
			w.GPU("NVIDIA-H100-80GB-HBM3", 8)
		case 1:
			w.GPU("NVIDIA-A100-SXM4-80GB", 4).Used(mlsysopsv1.ResourceGPU, "2")
		case 2, 3:
			w.Arch("arm64").Layer("edge")
		case 4:
			w.Layer("far_edge").Arch("arm64").CPU("4")
		}
		w.Used(corev1.ResourceCPU, fmt.Sprintf("%d", i%12))
		out = append(out, w.Obj())
	}
	return out
}
