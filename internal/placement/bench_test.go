package placement

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

// The benchmarks run the reference (the placement before the index,
// converting every node at every call) beside the index on the same
// nodes, so that a loaded machine slows both alike.

var benchComps = []struct {
	name string
	comp mlsysopsv1.Component
}{
	{"gpu", MakeComp("infer").GPU("NVIDIA-H100-80GB-HBM3", 2).Obj()},
	{"edge-arm64", MakeComp("sense").Arch("arm64").Layers("edge").Obj()},
	{"cpu-3-replicas", MakeComp("web").CPU("2").Replicas(3).Obj()},
}

func BenchmarkPlaceComponent5000Nodes(b *testing.B) {
	nodes := manyNodes("n", 5000)
	idx := NewIndexOf(nodes)
	for _, tc := range benchComps {
		comp := tc.comp
		req := Request{App: app(comp), Component: &comp}
		b.Run(tc.name+"/reference", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if d, err := refPlaceComponent(req, nodes); err != nil || !d.Feasible() {
					b.Fatal(err, d.Reason())
				}
			}
		})
		b.Run(tc.name+"/index", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if d, err := idx.Place(req); err != nil || !d.Feasible() {
					b.Fatal(err, d.Reason())
				}
			}
		})
	}
}

// BenchmarkPlaceApp100Clusters places a GPU and a CPU component on 100
// clusters of 20 nodes: identical clusters (the choice goes by name) and
// clusters as varied as a continuum's (realisticCluster, each with a
// different share in use). "every-cluster" evaluates each cluster as the
// reference does; "bounded" skips the clusters whose bound cannot
// outrank the chosen one (what the continuum does).
func BenchmarkPlaceApp100Clusters(b *testing.B) {
	shapes := []struct {
		name  string
		nodes func(i int) []Node
	}{
		{"identical", func(i int) []Node { return manyNodes(fmt.Sprintf("c%03d", i), 20) }},
		{"varied", func(i int) []Node { return variedCluster(fmt.Sprintf("c%03d", i), 20, i) }},
	}
	a := app(MakeComp("infer").GPU("NVIDIA-H100-80GB-HBM3", 2).Obj(), MakeComp("ui").CPU("1").Replicas(2).Obj())
	for _, sh := range shapes {
		ref := make([]refCluster, 100)
		clusters := make([]Cluster, 100)
		for i := range clusters {
			nodes := sh.nodes(i)
			ref[i] = refCluster{Name: fmt.Sprintf("c-%03d", i), Ready: true, Nodes: nodes}
			clusters[i] = Cluster{Name: ref[i].Name, Ready: true, Index: NewIndexOf(nodes)}
		}
		b.Run(sh.name+"/reference", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if d, err := refPlaceApp(AppRequest{App: a}, ref); err != nil || !d.Feasible() {
					b.Fatal(err, d.Reason())
				}
			}
		})
		for _, explain := range []bool{true, false} {
			name := "bounded"
			if explain {
				name = "every-cluster"
			}
			b.Run(sh.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				evaluated := 0
				cpu0 := processCPU()
				for i := 0; i < b.N; i++ {
					d, err := PlaceApp(AppRequest{App: a, Explain: explain}, clusters)
					if err != nil || !d.Feasible() {
						b.Fatal(err, d.Reason())
					}
					evaluated = len(d.Scores) + len(d.Rejected)
				}
				// On a shared machine the wall time per op includes waiting
				// for a core; the CPU time does not.
				b.ReportMetric((processCPU()-cpu0)*1e6/float64(b.N), "CPU-µs/op")
				b.ReportMetric(float64(evaluated), "clusters-evaluated/op")
			})
		}
	}
}

// variedCluster is realisticCluster with more or less of it in use as
// seed varies, and GPU models present in some clusters only.
func variedCluster(prefix string, n, seed int) []Node {
	nodes := realisticCluster(prefix, n)
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	for i := range nodes {
		nd := &nodes[i]
		alloc := nd.Node.Status.Allocatable[corev1.ResourceCPU]
		used := resource.NewMilliQuantity(r.Int64N(alloc.MilliValue()+1), resource.DecimalSI)
		nd.Requested[corev1.ResourceCPU] = *used
		if g, ok := nd.Node.Status.Allocatable[mlsysopsv1.ResourceGPU]; ok {
			if seed%3 == 0 && nd.Node.Labels[mlsysopsv1.LabelGPUProduct] == "NVIDIA-H100-80GB-HBM3" {
				// No H100 left here.
				nd.Requested[mlsysopsv1.ResourceGPU] = g
			} else {
				nd.Requested[mlsysopsv1.ResourceGPU] = *resource.NewQuantity(r.Int64N(g.Value()+1), resource.DecimalSI)
			}
		}
	}
	return nodes
}

// realisticCluster makes a cluster of n nodes of the kinds a continuum
// has: mostly CPU nodes in the cloud, edge and far-edge nodes on arm64,
// a tenth with GPUs of four models; a third of the capacity in use.
func realisticCluster(prefix string, n int) []Node {
	out := make([]Node, 0, n)
	for i := range n {
		w := MakeNode(fmt.Sprintf("%s-%04d", prefix, i))
		switch {
		case i%20 == 0:
			w.GPU("NVIDIA-H100-80GB-HBM3", 8).Used(mlsysopsv1.ResourceGPU, fmt.Sprint(i%5))
		case i%20 == 1:
			w.GPU("NVIDIA-A100-SXM4-80GB", 4).Used(mlsysopsv1.ResourceGPU, fmt.Sprint(i%3))
		case i%10 == 2:
			w.GPU("NVIDIA-L4", 2).Layer("edge")
		case i%10 < 6:
			w.Layer("edge").Arch("arm64").CPU("8")
		case i%10 < 8:
			w.Layer("far_edge").Arch("arm64").CPU("4")
		}
		w.Used(corev1.ResourceCPU, fmt.Sprintf("%dm", (i%7)*700)).Used(corev1.ResourcePods, fmt.Sprint(i%9))
		out = append(out, w.Obj())
	}
	return out
}

// reportOf is the capacity report of nodes, through JSON as over XMPP.
func reportOf(b *testing.B, cluster string, nodes []Node) *messaging.CapacityReport {
	var kn []corev1.Node
	var pods []corev1.Pod
	for _, n := range nodes {
		kn = append(kn, *n.Node)
		if cpu := n.Requested[corev1.ResourceCPU]; !cpu.IsZero() {
			pods = append(pods, corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: n.Name()},
				Spec: corev1.PodSpec{NodeName: n.Name(), Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, mlsysopsv1.ResourceGPU: n.Requested[mlsysopsv1.ResourceGPU]},
				}}}},
			})
		}
	}
	rep := Report(cluster, kn, pods, time.Now())
	if rep.Nodes == nil {
		b.Fatalf("report of %s has no node list", cluster)
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		b.Fatal(err)
	}
	var out messaging.CapacityReport
	if err := json.Unmarshal(raw, &out); err != nil {
		b.Fatal(err)
	}
	return &out
}

// BenchmarkApplyReport1000Nodes is the continuum's cost of a fresh
// capacity report of a 1,000-node cluster: decoding the JSON and
// updating the cluster's index (the first report builds it).
func BenchmarkApplyReport1000Nodes(b *testing.B) {
	nodes := realisticCluster("c", 1000)
	rep := reportOf(b, "c", nodes)
	raw, _ := json.Marshal(rep)
	b.ReportMetric(float64(len(raw))/1024, "report-KiB")
	idx := NewIndex()
	if err := idx.ApplyReport(rep, time.Now()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var r messaging.CapacityReport
		if err := json.Unmarshal(raw, &r); err != nil {
			b.Fatal(err)
		}
		if err := idx.ApplyReport(&r, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpsertPod is the cluster agent's cost of a pod event.
func BenchmarkUpsertPod(b *testing.B) {
	idx := NewIndexOf(realisticCluster("c", 1000))
	pods := make([]*corev1.Pod, 1000)
	for i := range pods {
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "mls-app", Name: fmt.Sprintf("p-%d", i), Labels: map[string]string{
				mlsysopsv1.LabelApp: "app", mlsysopsv1.LabelComponent: "c",
			}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("c-%04d", i), Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			}}}},
		}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p := pods[i%len(pods)]
		if i/len(pods)%2 == 0 {
			idx.UpsertPod(p)
		} else {
			idx.DeletePod(p.Namespace, p.Name)
		}
	}
}

// BenchmarkContinuumDecisions10x1000 places applications, through the
// assumed ledger, on 10 clusters of 1,000 nodes while every cluster's
// capacity report is applied once a second (as cluster agents send them
// when their pods change): the continuum's decisions per second.
func BenchmarkContinuumDecisions10x1000(b *testing.B) {
	clusters := make([]Cluster, 10)
	reports := make([]*messaging.CapacityReport, 10)
	for i := range clusters {
		name := fmt.Sprintf("cluster-%02d", i)
		reports[i] = reportOf(b, name, realisticCluster(name, 1000))
		clusters[i] = Cluster{Name: name, Ready: true, Index: NewIndex()}
		if err := clusters[i].Index.ApplyReport(reports[i], time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	apps := []*mlsysopsv1.MLSysOpsAppSpec{
		app(MakeComp("web").CPU("250m").Obj()),
		app(MakeComp("infer").GPU("NVIDIA-H100-80GB-HBM3", 1).Obj(), MakeComp("ui").CPU("500m").Replicas(2).Obj()),
		app(MakeComp("sense").Arch("arm64").Layers("far_edge").Obj()),
		app(MakeComp("edge-infer").GPU("NVIDIA-L4", 1).Layers("edge").Obj()),
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var applied atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			raw, _ := json.Marshal(reports[i%10])
			var r messaging.CapacityReport
			_ = json.Unmarshal(raw, &r)
			if err := clusters[i%10].Index.ApplyReport(&r, time.Now()); err != nil {
				b.Error(err)
				return
			}
			applied.Add(1)
		}
	}()
	ledger := NewAssumed(time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("app-%d", i)
		if _, err := ledger.PlaceApp(name, AppRequest{App: apps[i%len(apps)]}, clusters); err != nil {
			b.Fatal(err)
		}
		// Applications start running and leave the ledger as reports
		// show them, keeping a few hundred in flight.
		ledger.Visible(name)
		if i >= 300 {
			ledger.Forget(fmt.Sprintf("app-%d", i-300))
		}
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(applied.Load())/elapsed.Seconds(), "reports/s")
	// On a shared machine the wall-clock rate says how much of a core the
	// benchmark got; the CPU time per decision (the reports applied
	// meanwhile and the collector included) says what a decision costs.
	b.ReportMetric(1000*cpu/float64(b.N), "CPU-ms/decision")
}

// processCPU is this process's user and system time so far, in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
