package infra

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/placement"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

func node(name string, labels map[string]string, alloc corev1.ResourceList) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NodeStatus{Allocatable: alloc}}
}

func TestNodeResources(t *testing.T) {
	q := resource.MustParse
	cases := map[string]struct {
		n    placement.Node
		want api.Resources
	}{
		"GPU node with requests": {
			n: placement.Node{
				Node: node("gpu", map[string]string{mlsysopsv1.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", mlsysopsv1.LabelGPUMemory: "81920"},
					corev1.ResourceList{corev1.ResourceCPU: q("112"), corev1.ResourceMemory: q("2Ti"), mlsysopsv1.ResourceGPU: q("8")}),
				Requested: corev1.ResourceList{corev1.ResourceCPU: q("8500m"), corev1.ResourceMemory: q("64Gi"), mlsysopsv1.ResourceGPU: q("3")},
			},
			want: api.Resources{
				CPU:    api.CPU{Allocatable: 112000, Free: 103500},
				Memory: api.Memory{Allocatable: 2 << 40, Free: 2<<40 - 64<<30},
				GPUs:   map[string]api.GPUs{"NVIDIA-H100-80GB-HBM3": {Allocatable: 8, Free: 5, MemoryMiB: 81920}},
			},
		},
		"unlabelled GPUs and overcommitted CPU": {
			n: placement.Node{
				Node:      node("x", nil, corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi"), mlsysopsv1.ResourceGPU: q("1")}),
				Requested: corev1.ResourceList{corev1.ResourceCPU: q("2")},
			},
			want: api.Resources{
				CPU: api.CPU{Allocatable: 1000}, Memory: api.Memory{Allocatable: 1 << 30, Free: 1 << 30},
				GPUs: map[string]api.GPUs{"unknown": {Allocatable: 1, Free: 1}},
			},
		},
		"no GPUs": {
			n:    placement.Node{Node: node("cpu", nil, corev1.ResourceList{corev1.ResourceCPU: q("4")})},
			want: api.Resources{CPU: api.CPU{Allocatable: 4000, Free: 4000}},
		},
	}
	for name, tc := range cases {
		if diff := cmp.Diff(tc.want, NodeResources(tc.n)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	var sum api.Resources
	AddResources(&sum, NodeResources(cases["GPU node with requests"].n))
	AddResources(&sum, NodeResources(cases["unlabelled GPUs and overcommitted CPU"].n))
	if sum.CPU.Allocatable != 113000 || len(sum.GPUs) != 2 || sum.GPUs["NVIDIA-H100-80GB-HBM3"].Free != 5 {
		t.Errorf("sum: %+v", sum)
	}
}
