package placement

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

func pod(node string, phase corev1.PodPhase, req corev1.ResourceList) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + node + "-" + strings.ToLower(string(phase))},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: req}}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func TestReportTotalsAndRoundTrip(t *testing.T) {
	h100 := MakeNode("h100").GPU("NVIDIA-H100-80GB-HBM3", 8).Obj()
	h100b := MakeNode("h100-b").GPU("NVIDIA-H100-80GB-HBM3", 4).Obj()
	down := MakeNode("down").GPU("NVIDIA-A100-SXM4-80GB", 4).NotReady().Obj()
	cordoned := MakeNode("cordoned").Obj()
	cordoned.Node.Spec.Unschedulable = true
	tainted := MakeNode("tainted").Arch("arm64").Obj()
	tainted.Node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}}
	nodes := []corev1.Node{*h100.Node, *h100b.Node, *down.Node, *cordoned.Node, *tainted.Node}
	pods := []corev1.Pod{
		pod("h100", corev1.PodRunning, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), mlsysopsv1.ResourceGPU: resource.MustParse("3")}),
		pod("h100", corev1.PodSucceeded, corev1.ResourceList{mlsysopsv1.ResourceGPU: resource.MustParse("5")}), // finished: not counted
		pod("", corev1.PodPending, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}),         // unscheduled
	}
	rep := Report("cloud-1", nodes, pods, time.Unix(100, 0))
	if err := rep.Validate(); err != nil {
		t.Fatal(err)
	}
	// Ready and schedulable: h100, h100-b, tainted (taints do not remove
	// capacity from the totals; placement filters them).
	if rep.ReadyNodes != 3 {
		t.Errorf("ready nodes %d, want 3", rep.ReadyNodes)
	}
	if rep.CPUMillis.Allocatable != 48000 || rep.CPUMillis.Free != 46000 {
		t.Errorf("cpu %+v, want 48000 allocatable, 46000 free", rep.CPUMillis)
	}
	want := map[string]messaging.GPUCapacity{"NVIDIA-H100-80GB-HBM3": {Total: 12, Free: 9, MemoryMiB: 81920}}
	if !reflect.DeepEqual(rep.GPUs, want) {
		t.Errorf("gpus %+v, want %+v", rep.GPUs, want)
	}
	if len(rep.Nodes) != 5 {
		t.Fatalf("%d nodes in the report, want 5", len(rep.Nodes))
	}

	// Through JSON, as over XMPP, and back: placement decides the same.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got messaging.CapacityReport
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	back := NewIndex()
	if err := back.ApplyReport(&got, time.Now()); err != nil {
		t.Fatal(err)
	}
	direct := []Node{h100, h100b, down, cordoned, tainted}
	direct[0].Requested = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), mlsysopsv1.ResourceGPU: resource.MustParse("3")}
	for _, a := range []*mlsysopsv1.MLSysOpsAppSpec{
		app(MakeComp("infer").GPU("NVIDIA-H100-80GB-HBM3", 5).Obj()),
		app(MakeComp("infer").GPU("NVIDIA-H100-80GB-HBM3", 6).Obj()),
		app(MakeComp("a100").GPU("NVIDIA-A100-SXM4-80GB", 1).Obj()),
		app(MakeComp("edge").Arch("arm64").Obj()),
	} {
		d1, err1 := PlaceApp(AppRequest{App: a}, []Cluster{cluster("cloud-1", direct...)})
		d2, err2 := PlaceApp(AppRequest{App: a}, []Cluster{{Name: "cloud-1", Ready: true, Index: back}})
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !reflect.DeepEqual(d1.Clusters, d2.Clusters) || d1.Reason() != d2.Reason() {
			t.Errorf("%s: from the nodes %v (%s), from the report %v (%s)", a.Components[0].Metadata.Name, d1.Clusters, d1.Reason(), d2.Clusters, d2.Reason())
		}
	}
}

func TestReportDropsOversizedNodeList(t *testing.T) {
	var nodes []corev1.Node
	for i, n := range manyNodes("n", 3000) {
		// Every node different: no shape is shared.
		n.Node.Labels["example.com/padding"] = fmt.Sprintf("%s-%d", strings.Repeat("x", 60), i)
		nodes = append(nodes, *n.Node)
	}
	rep := Report("big", nodes, nil, time.Now())
	if rep.Nodes != nil {
		t.Errorf("node list kept: %d nodes", len(rep.Nodes))
	}
	if rep.ReadyNodes != 3000 {
		t.Errorf("totals lost: %d ready nodes", rep.ReadyNodes)
	}
}

func TestApplyReportRejectsBadValues(t *testing.T) {
	for name, nc := range map[string]messaging.NodeCapacity{
		"allocatable": {Name: "a", Allocatable: map[string]string{"cpu": "lots"}},
		"requested":   {Name: "a", Requested: map[string]string{"memory": "1Zz"}},
		"taints":      {Name: "a", Taints: []string{"key=value:Sometimes"}},
	} {
		err := NewIndex().ApplyReport(&messaging.CapacityReport{Cluster: "c", Nodes: []messaging.NodeCapacity{nc}}, time.Now())
		if err == nil || !strings.Contains(err.Error(), "nodes[0] (a)."+name) {
			t.Errorf("%s: error %v, want one naming nodes[0] (a).%s", name, err, name)
		}
	}
}
