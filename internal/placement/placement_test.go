package placement

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

func TestPlaceComponent(t *testing.T) {
	cases := map[string]struct {
		comp         mlsysopsv1.Component
		nodes        []Node
		exclude      map[string]string
		wantNodes    []string
		wantAssign   map[string]int32
		wantUnplaced int32
		wantRejected map[string]string
	}{
		"GPU model only one node has": {
			comp: MakeComp("infer").GPU("NVIDIA-H100-80GB-HBM3", 1).Obj(),
			nodes: []Node{
				MakeNode("a100").GPU("NVIDIA-A100-SXM4-80GB", 4).Obj(),
				MakeNode("h100").GPU("NVIDIA-H100-80GB-HBM3", 8).Obj(),
				MakeNode("cpu").Obj(),
			},
			wantNodes:  []string{"h100"},
			wantAssign: map[string]int32{"h100": 1},
			wantRejected: map[string]string{
				"a100": "have nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB (want in NVIDIA-H100-80GB-HBM3)",
				"cpu":  "lack label nvidia.com/gpu.present (want in true)",
			},
		},
		"GPU nodes' taint is tolerated by GPU components only": {
			comp: MakeComp("infer").GPU("NVIDIA-L4", 1).Obj(),
			nodes: []Node{
				MakeNode("l4").GPU("NVIDIA-L4", 1).Taint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule).Obj(),
				MakeNode("l4-other").GPU("NVIDIA-L4", 1).Taint("dedicated", "ml", corev1.TaintEffectNoSchedule).Obj(),
			},
			wantNodes:    []string{"l4"},
			wantAssign:   map[string]int32{"l4": 1},
			wantRejected: map[string]string{"l4-other": "have the untolerated taint dedicated=ml:NoSchedule"},
		},
		"a CPU component does not tolerate the GPU taint": {
			comp:         MakeComp("web").Obj(),
			nodes:        []Node{MakeNode("l4").GPU("NVIDIA-L4", 1).Taint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule).Obj()},
			wantUnplaced: 1,
			wantAssign:   map[string]int32{},
			wantRejected: map[string]string{"l4": "have the untolerated taint nvidia.com/gpu=present:NoSchedule"},
		},
		"a model too big for the GPU's memory": {
			comp: MakeComp("llm").GPU("", 1).GPUMemoryGB(40).Obj(),
			nodes: []Node{
				MakeNode("l4").GPU("NVIDIA-L4", 1).GPUMemory("24576").Obj(),
				MakeNode("a100").GPU("NVIDIA-A100-SXM4-80GB", 1).Obj(),
				MakeNode("cpu").Obj(),
			},
			wantNodes:  []string{"a100"},
			wantAssign: map[string]int32{"a100": 1},
			wantRejected: map[string]string{
				"l4":  "have GPUs of 24576 MiB, too small: the component needs GPUs of at least 40960 MiB",
				"cpu": "lack label nvidia.com/gpu.present (want in true)",
			},
		},
		"GPUs already taken": {
			comp:         MakeComp("train").GPU("NVIDIA-A100-SXM4-80GB", 3).Obj(),
			nodes:        []Node{MakeNode("a100").GPU("NVIDIA-A100-SXM4-80GB", 4).Used(mlsysopsv1.ResourceGPU, "2").Obj()},
			wantUnplaced: 1,
			wantAssign:   map[string]int32{},
			wantRejected: map[string]string{"a100": "have insufficient nvidia.com/gpu"},
		},
		"edge arm64 component": {
			comp: MakeComp("sense").Arch("arm64").Layers("edge", "far_edge").Obj(),
			nodes: []Node{
				MakeNode("cloud").Obj(),
				MakeNode("jetson").Arch("arm64").Layer("edge").Obj(),
				MakeNode("edge-amd").Layer("edge").Obj(),
			},
			wantNodes:  []string{"jetson"},
			wantAssign: map[string]int32{"jetson": 1},
			wantRejected: map[string]string{
				"cloud":    "have kubernetes.io/arch=amd64 (want in arm64)",
				"edge-amd": "have kubernetes.io/arch=amd64 (want in arm64)",
			},
		},
		"CPU work keeps off GPU nodes": {
			comp:         MakeComp("web").CPU("1").Obj(),
			nodes:        []Node{MakeNode("a-gpu").GPU("NVIDIA-H100-80GB-HBM3", 8).Obj(), MakeNode("b-cpu").Obj()},
			wantNodes:    []string{"b-cpu"},
			wantAssign:   map[string]int32{"b-cpu": 1},
			wantRejected: map[string]string{},
		},
		"not ready and excluded nodes": {
			comp:         MakeComp("web").Obj(),
			nodes:        []Node{MakeNode("down").NotReady().Obj(), MakeNode("gone").Obj(), MakeNode("ok").Obj()},
			exclude:      map[string]string{"gone": "node agent offline"},
			wantNodes:    []string{"ok"},
			wantAssign:   map[string]int32{"ok": 1},
			wantRejected: map[string]string{"down": "are not Ready", "gone": "node agent offline"},
		},
		"replicas spread when one node is full": {
			comp:         MakeComp("web").CPU("6").Replicas(3).Obj(),
			nodes:        []Node{MakeNode("n1").Obj(), MakeNode("n2").Obj()},
			wantNodes:    []string{"n1", "n2"},
			wantAssign:   map[string]int32{"n1": 2, "n2": 1},
			wantRejected: map[string]string{},
		},
		"replicas beyond capacity": {
			comp:         MakeComp("web").CPU("10").Replicas(3).Obj(),
			nodes:        []Node{MakeNode("n1").Obj(), MakeNode("n2").Obj()},
			wantNodes:    []string{"n1", "n2"},
			wantAssign:   map[string]int32{"n1": 1, "n2": 1},
			wantUnplaced: 1,
			wantRejected: map[string]string{},
		},
		"CPU frequency": {
			comp:         MakeComp("hpc").FreqGHz(3).Obj(),
			nodes:        []Node{MakeNode("slow").MaxFreqGHz(2.2).Obj(), MakeNode("fast").MaxFreqGHz(3.5).Obj()},
			wantNodes:    []string{"fast"},
			wantAssign:   map[string]int32{"fast": 1},
			wantRejected: map[string]string{"slow": "run their CPU at most at 2.20 GHz (want 3.00 GHz)"},
		},
		"pinned node": {
			comp:         MakeComp("web").OnNode("b").Obj(),
			nodes:        []Node{MakeNode("a").Obj(), MakeNode("b").Obj()},
			wantNodes:    []string{"b"},
			wantAssign:   map[string]int32{"b": 1},
			wantRejected: map[string]string{"a": "have kubernetes.io/hostname=a (want in b)"},
		},
		"FPGA": {
			comp:         MakeComp("flow").FPGA("zcu102").Obj(),
			nodes:        []Node{MakeNode("fpga").FPGA("zcu102").Obj(), MakeNode("plain").Obj()},
			wantNodes:    []string{"fpga"},
			wantAssign:   map[string]int32{"fpga": 1},
			wantRejected: map[string]string{"plain": "lack label mlsysops.eu/fpga.model (want in zcu102)"},
		},
		"ties broken by name": {
			comp:         MakeComp("web").Obj(),
			nodes:        []Node{MakeNode("b").Obj(), MakeNode("a").Obj()},
			wantNodes:    []string{"a"},
			wantAssign:   map[string]int32{"a": 1},
			wantRejected: map[string]string{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			comp := tc.comp
			d, err := PlaceComponent(Request{App: app(comp), Component: &comp, Exclude: tc.exclude}, tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantNodes, d.Nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAssign, d.Assignment); diff != "" {
				t.Errorf("assignment (-want +got):\n%s", diff)
			}
			if d.Unplaced != tc.wantUnplaced {
				t.Errorf("unplaced = %d, want %d", d.Unplaced, tc.wantUnplaced)
			}
			if diff := cmp.Diff(tc.wantRejected, d.Rejected); diff != "" {
				t.Errorf("rejected (-want +got):\n%s", diff)
			}
			if d.Feasible() != (tc.wantUnplaced == 0 && len(tc.wantNodes) > 0) {
				t.Errorf("feasible = %v", d.Feasible())
			}
		})
	}
}

func TestPlaceComponentDoesNotModifyNodes(t *testing.T) {
	nodes := []Node{MakeNode("n").Used(corev1.ResourceCPU, "1").Obj()}
	comp := MakeComp("web").CPU("2").Replicas(2).Obj()
	if _, err := PlaceComponent(Request{App: app(comp), Component: &comp}, nodes); err != nil {
		t.Fatal(err)
	}
	if q := nodes[0].Requested[corev1.ResourceCPU]; q.String() != "1" {
		t.Errorf("input requested cpu changed to %s", q.String())
	}
}

func TestDecisionReason(t *testing.T) {
	comp := MakeComp("infer").GPU("NVIDIA-H100-80GB-HBM3", 1).Obj()
	d, _ := PlaceComponent(Request{App: app(comp), Component: &comp}, []Node{
		MakeNode("a").Obj(), MakeNode("b").Obj(), MakeNode("c").NotReady().Obj(),
	})
	want := "no node fits: 2 node(s) lack label nvidia.com/gpu.present (want in true); 1 node(s) are not Ready"
	if got := d.Reason(); got != want {
		t.Errorf("reason:\n got %s\nwant %s", got, want)
	}
}

func cluster(name string, nodes ...Node) Cluster {
	return Cluster{Name: name, Ready: true, Index: NewIndexOf(nodes)}
}

func TestPlaceApp(t *testing.T) {
	gpuApp := app(MakeComp("infer").GPU("NVIDIA-H100-80GB-HBM3", 2).Obj(), MakeComp("ui").CPU("1").Obj())
	clusters := []Cluster{
		cluster("cloud-1", MakeNode("h100").GPU("NVIDIA-H100-80GB-HBM3", 8).Obj(), MakeNode("c1").Obj()),
		cluster("cloud-2", MakeNode("a100").GPU("NVIDIA-A100-SXM4-80GB", 4).Obj(), MakeNode("c2").Obj()),
		cluster("edge-1", MakeNode("jetson").Arch("arm64").Layer("edge").Obj()),
	}
	cases := map[string]struct {
		app          *mlsysopsv1.MLSysOpsAppSpec
		clusters     []Cluster
		exclude      map[string]string
		want         []string
		wantRejected []string // clusters rejected
		wantReason   string   // substring of the rejection of the first rejected cluster
	}{
		"GPU model in one cluster": {
			app: gpuApp, clusters: clusters, want: []string{"cloud-1"},
			wantRejected: []string{"cloud-2", "edge-1"}, wantReason: "component infer: no node fits",
		},
		"user cluster_id honoured over a better fit": {
			app:      withPlacement(app(MakeComp("web").Obj()), &mlsysopsv1.ClusterPlacement{ClusterID: []string{"edge-1"}}),
			clusters: clusters, want: []string{"edge-1"},
			wantRejected: []string{"cloud-1", "cloud-2"}, wantReason: "not in cluster_placement.cluster_id",
		},
		"user order breaks ties": {
			app:      withPlacement(app(MakeComp("web").Obj()), &mlsysopsv1.ClusterPlacement{ClusterID: []string{"b", "a"}}),
			clusters: []Cluster{cluster("a", MakeNode("x").Obj()), cluster("b", MakeNode("y").Obj())},
			want:     []string{"b"},
		},
		"fits nowhere": {
			app: app(MakeComp("big").GPU("NVIDIA-H100-80GB-HBM3", 16).Obj()), clusters: clusters,
			wantRejected: []string{"cloud-1", "cloud-2", "edge-1"}, wantReason: "have insufficient nvidia.com/gpu",
		},
		"not Ready and excluded clusters": {
			app:          app(MakeComp("web").Obj()),
			clusters:     []Cluster{{Name: "down", Index: NewIndexOf([]Node{MakeNode("x").Obj()})}, cluster("gone", MakeNode("y").Obj()), cluster("ok", MakeNode("z").Obj())},
			exclude:      map[string]string{"gone": "cluster agent offline"},
			want:         []string{"ok"},
			wantRejected: []string{"down", "gone"}, wantReason: "not Ready in Karmada",
		},
		"not Ready says why": {
			app:          app(MakeComp("web").Obj()),
			clusters:     []Cluster{{Name: "new", NotReady: "has not got the MLSysOpsApp API yet", Index: NewIndexOf([]Node{MakeNode("x").Obj()})}, cluster("ok", MakeNode("z").Obj())},
			want:         []string{"ok"},
			wantRejected: []string{"new"}, wantReason: "has not got the MLSysOpsApp API yet",
		},
		"accelerators and instances": {
			app:      withPlacement(app(MakeComp("web").Obj()), &mlsysopsv1.ClusterPlacement{Accelerators: []string{"gpu"}, Instances: 2}),
			clusters: clusters, want: []string{"cloud-1", "cloud-2"},
			wantRejected: []string{"edge-1"}, wantReason: "no node with accelerator gpu",
		},
		"components must fit together": {
			app:      app(MakeComp("a").GPU("NVIDIA-A100-SXM4-80GB", 3).Obj(), MakeComp("b").GPU("NVIDIA-A100-SXM4-80GB", 2).Obj()),
			clusters: clusters[1:2], wantRejected: []string{"cloud-2"}, wantReason: "component b:",
		},
		"node types": {
			app:      withPlacement(app(MakeComp("web").Obj()), &mlsysopsv1.ClusterPlacement{NodeTypes: []mlsysopsv1.ContinuumLayer{"edge"}}),
			clusters: clusters, want: []string{"edge-1"}, wantRejected: []string{"cloud-1", "cloud-2"}, wantReason: "no node of type [edge]",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Rejections are asked for: every cluster evaluated.
			d, err := PlaceApp(AppRequest{App: tc.app, Exclude: tc.exclude, Explain: true}, tc.clusters)
			if err != nil {
				t.Fatal(err)
			}
			bounded, err := PlaceApp(AppRequest{App: tc.app, Exclude: tc.exclude}, tc.clusters)
			if err != nil {
				t.Fatal(err)
			}
			sameChoice(t, name, d, bounded)
			if diff := cmp.Diff(tc.want, d.Clusters); diff != "" {
				t.Errorf("clusters (-want +got):\n%s", diff)
			}
			var rejected []string
			for _, c := range tc.clusters {
				if _, ok := d.Rejected[c.Name]; ok {
					rejected = append(rejected, c.Name)
				}
			}
			if diff := cmp.Diff(tc.wantRejected, rejected); diff != "" {
				t.Errorf("rejected (-want +got):\n%s", diff)
			}
			if tc.wantReason != "" && len(rejected) > 0 && !strings.Contains(strings.Join(d.Rejected[rejected[0]], "; "), tc.wantReason) {
				t.Errorf("reason for %s = %q, want it to contain %q", rejected[0], d.Rejected[rejected[0]], tc.wantReason)
			}
			if !d.Feasible() && d.Reason() == "" {
				t.Error("infeasible without a reason")
			}
		})
	}
}

func withPlacement(a *mlsysopsv1.MLSysOpsAppSpec, cp *mlsysopsv1.ClusterPlacement) *mlsysopsv1.MLSysOpsAppSpec {
	a.ClusterPlacement = cp
	return a
}

func TestPlacementIsDeterministic(t *testing.T) {
	nodes := manyNodes("n", 300)
	comp := MakeComp("web").CPU("2").Replicas(5).Obj()
	first, _ := PlaceComponent(Request{App: app(comp), Component: &comp}, nodes)
	for i := 0; i < 5; i++ {
		again, _ := PlaceComponent(Request{App: app(comp), Component: &comp}, nodes)
		if diff := cmp.Diff(first, again); diff != "" {
			t.Fatalf("run %d differs:\n%s", i, diff)
		}
	}
}
