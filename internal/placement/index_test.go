package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// gen makes random but reproducible nodes, components and applications
// that exercise every filter and the score: readiness, cordons, taints,
// GPU models and memories, architectures, layers, FPGAs, user labels,
// CPU frequencies, container runtimes, runtime classes, extra resources,
// pods of components, and amounts at milli precision.
type gen struct{ r *rand.Rand }

func newGen(seed uint64) *gen { return &gen{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

func (g *gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g *gen) chance(p float64) bool    { return g.r.Float64() < p }

var (
	genGPUs   = []string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L4", "Tesla-T4"}
	genLayers = []string{"cloud", "edge", "far_edge"}
)

func (g *gen) node(name string) Node {
	w := MakeNode(name).CPU(fmt.Sprintf("%dm", 1000+g.r.IntN(64)*500))
	w.Node.Node.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse(fmt.Sprintf("%dMi", 1024*(1+g.r.IntN(64))))
	w.Node.Node.Status.Allocatable[corev1.ResourcePods] = *resource.NewQuantity(int64(5+g.r.IntN(30)), resource.DecimalSI)
	w.Layer(g.pick(genLayers...)).Arch(g.pick("amd64", "amd64", "arm64"))
	if g.chance(0.3) {
		w.GPU(g.pick(genGPUs...), int64(1+g.r.IntN(8)))
		w.Label(mlsysopsv1.LabelGPUMemory, g.pick("16384", "24576", "81920"))
		w.Used(mlsysopsv1.ResourceGPU, fmt.Sprint(g.r.IntN(3)))
	}
	if g.chance(0.05) {
		w.FPGA(g.pick("zcu102", "u280"))
	}
	if g.chance(0.2) {
		w.Label("mlsysops.eu/label.zone", g.pick("a", "b"))
	}
	if g.chance(0.1) {
		w.Node.Node.Status.Allocatable["example.com/foo"] = *resource.NewQuantity(int64(g.r.IntN(4)), resource.DecimalSI)
	}
	if g.chance(0.08) {
		w.NotReady()
	}
	if g.chance(0.05) {
		w.Node.Node.Spec.Unschedulable = true
	}
	if g.chance(0.08) {
		w.Node.Node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: g.pick("ml", "db"), Effect: corev1.TaintEffect(g.pick("NoSchedule", "NoExecute", "PreferNoSchedule"))}}
	}
	w.Used(corev1.ResourceCPU, fmt.Sprintf("%dm", g.r.IntN(8000)))
	w.Used(corev1.ResourceMemory, fmt.Sprintf("%dMi", g.r.IntN(16*1024)))
	w.Used(corev1.ResourcePods, fmt.Sprint(g.r.IntN(6)))
	if g.chance(0.3) {
		d := &mlsysopsv1.MLSysOpsNodeSpec{Hardware: &mlsysopsv1.NodeHardware{CPU: &mlsysopsv1.NodeCPU{}}}
		if g.chance(0.7) {
			d.Hardware.CPU.Frequency = []int64{1_200_000_000, int64(1_500_000_000 + g.r.IntN(3)*700_000_000)}
		}
		if g.chance(0.5) {
			p := float64(g.r.IntN(6000))
			d.Hardware.CPU.PerformanceIndicator = &p
		}
		if g.chance(0.5) {
			d.Environment.ContainerRuntime = []string{g.pick("containerd", "crio")}
		}
		w.Description = d
	}
	return w.Obj()
}

// withPods gives some nodes pods of the components app/c0..c2 (counted
// in Requested, as NodesWithPods does).
func (g *gen) withPods(nodes []Node, app string) {
	for i := range nodes {
		if !g.chance(0.3) {
			continue
		}
		cpu := resource.MustParse(fmt.Sprintf("%dm", 100*(1+g.r.IntN(10))))
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("pod-%d", i), Labels: map[string]string{
				mlsysopsv1.LabelApp: app, mlsysopsv1.LabelComponent: fmt.Sprintf("c%d", g.r.IntN(3)),
			}},
			Spec: corev1.PodSpec{NodeName: nodes[i].Name(), Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: cpu},
			}}}},
		}
		nodes[i].Pods = append(nodes[i].Pods, p)
		AddPodRequests(nodes[i].Requested, p)
	}
}

func (g *gen) nodes(prefix string, n int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = g.node(fmt.Sprintf("%s-%03d", prefix, i))
	}
	return out
}

func (g *gen) comp(name string, nodeNames []string) mlsysopsv1.Component {
	w := MakeComp(name).CPU(fmt.Sprintf("%dm", 100*(1+g.r.IntN(40))))
	mem := resource.MustParse(fmt.Sprintf("%dMi", 128*(1+g.r.IntN(32))))
	w.pr().Memory = &mlsysopsv1.MemoryRequirements{Requests: &mem}
	if g.chance(0.3) {
		model := ""
		if g.chance(0.8) {
			model = g.pick(genGPUs...)
		}
		w.GPU(model, int32(1+g.r.IntN(3)))
		if g.chance(0.2) {
			w.pr().GPU.Memory = int64(g.pick("16", "24", "80")[0]-'0') * 10
		}
	}
	if g.chance(0.3) {
		w.Arch(g.pick("amd64", "arm64"))
	}
	if g.chance(0.3) {
		w.Layers(mlsysopsv1.ContinuumLayer(g.pick(genLayers...)), mlsysopsv1.ContinuumLayer(g.pick(append(genLayers, "*")...)))
	}
	if g.chance(0.05) && len(nodeNames) > 0 {
		w.OnNode(nodeNames[g.r.IntN(len(nodeNames))])
	}
	if g.chance(0.05) {
		w.FPGA(g.pick("zcu102", "u280"))
	}
	if g.chance(0.1) {
		w.FreqGHz(float64(15+g.r.IntN(15)) / 10)
	}
	if g.chance(0.1) {
		w.ContainerRuntime = g.pick("containerd", "crio")
	}
	if g.chance(0.05) {
		w.RuntimeClassName = "nvidia"
	}
	if g.chance(0.1) {
		w.np().Labels = []string{"zone:" + g.pick("a", "b")}
	}
	if g.chance(0.05) {
		w.Containers = append(w.Containers, mlsysopsv1.Container{Image: "side:1", PlatformRequirements: &mlsysopsv1.PlatformRequirements{
			CPU: &mlsysopsv1.CPURequirements{Requests: ptr(resource.MustParse("50m"))},
		}})
	}
	if g.chance(0.4) {
		w.Replicas(int32(1 + g.r.IntN(6)))
	}
	return w.Obj()
}

func ptr[T any](v T) *T { return &v }

func (g *gen) exclude(nodes []Node) map[string]string {
	if !g.chance(0.3) {
		return nil
	}
	out := map[string]string{}
	for _, n := range nodes {
		if g.chance(0.1) {
			out[n.Name()] = "node agent gone"
		}
	}
	return out
}

func names(nodes []Node) []string {
	out := make([]string, len(nodes))
	for i := range nodes {
		out[i] = nodes[i].Name()
	}
	return out
}

// Node placement on the index decides as the reference did on the same
// nodes: chosen nodes, replicas, scores and every rejection reason.
func TestIndexDecidesAsTheReference(t *testing.T) {
	for seed := uint64(1); seed <= 150; seed++ {
		g := newGen(seed)
		nodes := g.nodes("n", 1+g.r.IntN(120))
		g.withPods(nodes, "app")
		comp := g.comp(fmt.Sprintf("c%d", g.r.IntN(3)), names(nodes))
		req := Request{App: app(comp), Component: &comp, Exclude: g.exclude(nodes)}
		if g.chance(0.2) {
			req.Replicas = int32(1 + g.r.IntN(4))
		}
		want, wantErr := refPlaceComponent(req, nodes)
		idx := NewIndexOf(nodes)

		explained := req
		explained.Explain = true
		got, err := idx.Place(explained)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("seed %d: error %v, want %v", seed, err, wantErr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d: explained decision differs (-reference +index):\n%s", seed, diff)
		}
		plain, _ := idx.Place(req)
		checkPlain(t, seed, want, plain)
	}
}

// checkPlain compares a decision made without Explain with the
// reference's: the same nodes and replicas, the chosen nodes' scores,
// and every reason when a replica did not fit.
func checkPlain(t *testing.T, seed uint64, want, got Decision) {
	t.Helper()
	if diff := cmp.Diff(want.Nodes, got.Nodes); diff != "" {
		t.Fatalf("seed %d: nodes differ:\n%s", seed, diff)
	}
	if diff := cmp.Diff(want.Assignment, got.Assignment); diff != "" || want.Unplaced != got.Unplaced {
		t.Fatalf("seed %d: assignment differs (unplaced %d, %d):\n%s", seed, want.Unplaced, got.Unplaced, diff)
	}
	for n := range got.Assignment {
		if want.Scores[n] != got.Scores[n] {
			t.Fatalf("seed %d: score of %s %d, want %d", seed, n, got.Scores[n], want.Scores[n])
		}
	}
	if !want.Feasible() {
		if diff := cmp.Diff(want.Rejected, got.Rejected); diff != "" || want.Reason() != got.Reason() {
			t.Fatalf("seed %d: rejections differ:\n%s", seed, diff)
		}
	}
}

// Placing again without the component's own pods, on some nodes only,
// with usage added: as the reference on nodes so adjusted.
func TestIndexOptionsDecideAsTheReference(t *testing.T) {
	for seed := uint64(1000); seed < 1100; seed++ {
		g := newGen(seed)
		nodes := g.nodes("n", 1+g.r.IntN(60))
		g.withPods(nodes, "app")
		comp := g.comp(fmt.Sprintf("c%d", g.r.IntN(3)), names(nodes))
		req := Request{App: app(comp), Component: &comp, Exclude: g.exclude(nodes), Explain: true}
		adjusted := refCopyNodes(nodes)
		if g.chance(0.5) {
			req.Own = ComponentKey{App: "app", Component: comp.Metadata.Name}
			for i := range adjusted {
				for _, p := range adjusted[i].Pods {
					if p.Labels[mlsysopsv1.LabelComponent] == comp.Metadata.Name {
						own := corev1.ResourceList{}
						AddPodRequests(own, p)
						for res, q := range own {
							cur := adjusted[i].Requested[res]
							cur.Sub(q)
							adjusted[i].Requested[res] = cur
						}
					}
				}
			}
		}
		if g.chance(0.5) {
			extra := Usage{}
			for i := range adjusted {
				if g.chance(0.2) {
					l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 250*g.r.IntN(8))), corev1.ResourcePods: resource.MustParse("1")}
					extra.Add(adjusted[i].Name(), l, 1)
					for res, q := range l {
						add(adjusted[i].Requested, res, q)
					}
				}
			}
			req.Extra = []Usage{extra}
		}
		within := adjusted
		if g.chance(0.4) {
			within = nil
			for i := range adjusted {
				if g.chance(0.2) {
					within = append(within, adjusted[i])
					req.Within = append(req.Within, adjusted[i].Name())
				}
			}
			if req.Within == nil {
				req.Within = []string{}
			}
		}
		want, _ := refPlaceComponent(req, within)
		got, err := NewIndexOf(nodes).Place(req)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d: decision differs (-reference +index):\n%s", seed, diff)
		}
	}
}

func (g *gen) app(name string, clusters []string, nodeNames []string) *mlsysopsv1.MLSysOpsAppSpec {
	a := &mlsysopsv1.MLSysOpsAppSpec{Name: name}
	for i := 0; i < 1+g.r.IntN(3); i++ {
		a.Components = append(a.Components, g.comp(fmt.Sprintf("c%d", i), nodeNames))
	}
	if g.chance(0.5) {
		cp := &mlsysopsv1.ClusterPlacement{}
		if g.chance(0.3) {
			cp.ClusterID = []string{clusters[g.r.IntN(len(clusters))], clusters[g.r.IntN(len(clusters))]}
		}
		if g.chance(0.3) {
			cp.Instances = int32(1 + g.r.IntN(3))
		}
		if g.chance(0.2) {
			cp.Accelerators = []string{g.pick("gpu", "fpga", "tpu")}
		}
		if g.chance(0.2) {
			cp.NodeTypes = []mlsysopsv1.ContinuumLayer{mlsysopsv1.ContinuumLayer(g.pick(append(genLayers, "*")...))}
		}
		if g.chance(0.2) {
			cp.CloudProvider = g.pick("aws", "gcp")
		}
		if g.chance(0.2) {
			cp.Location = &mlsysopsv1.PlacementLocation{Continent: []string{g.pick("Europe", "Asia")}}
		}
		a.ClusterPlacement = cp
	}
	return a
}

// clusters makes n clusters both as the reference's and as the index's.
func (g *gen) clusters(n int) ([]refCluster, []Cluster, []string) {
	var ref []refCluster
	var idx []Cluster
	var all []string
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		nodes := g.nodes(name, 1+g.r.IntN(40))
		all = append(all, names(nodes)...)
		rc := refCluster{Name: name, Ready: !g.chance(0.1), Continent: g.pick("Europe", "Asia"), CloudProvider: g.pick("aws", "gcp"), Nodes: nodes}
		ref = append(ref, rc)
		idx = append(idx, Cluster{Name: name, Ready: rc.Ready, Continent: rc.Continent, CloudProvider: rc.CloudProvider, Index: NewIndexOf(nodes)})
	}
	return ref, idx, all
}

// clusterNames lists the clusters' names.
func clusterNames(clusters []Cluster) []string {
	out := make([]string, len(clusters))
	for i := range clusters {
		out[i] = clusters[i].Name
	}
	return out
}

// milliRequests makes a decision's Requests comparable.
var milliRequests = cmp.Transformer("milli", func(q resource.Quantity) int64 { return q.MilliValue() })

// Cluster placement over indexes decides as the reference over node
// lists: clusters, reasons, scores and what each node takes.
func TestPlaceAppDecidesAsTheReference(t *testing.T) {
	for seed := uint64(2000); seed < 2100; seed++ {
		g := newGen(seed)
		ref, clusters, all := g.clusters(1 + g.r.IntN(6))
		names := clusterNames(clusters)
		req := AppRequest{App: g.app("app", names, all)}
		if g.chance(0.2) {
			req.Exclude = map[string]string{names[0]: "cluster agent gone"}
		}
		want, wantErr := refPlaceApp(req, ref)
		req.Explain = true
		got, err := PlaceApp(req, clusters)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("seed %d: error %v, want %v", seed, err, wantErr)
		}
		if diff := cmp.Diff(want, got, milliRequests); diff != "" {
			t.Fatalf("seed %d: decision differs (-reference +index):\n%s", seed, diff)
		}
		req.Explain = false
		got, err = PlaceApp(req, clusters)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("seed %d: error %v, want %v", seed, err, wantErr)
		}
		sameChoice(t, fmt.Sprintf("seed %d", seed), want, got)
	}
}

// sameChoice fails unless got, a decision that may have skipped
// clusters, chose as want, which evaluated every cluster: the same
// clusters and what they take, and of the clusters got evaluated the same
// scores and reasons; every reason when nothing fits.
func sameChoice(t *testing.T, what string, want, got ClusterDecision) {
	t.Helper()
	if diff := cmp.Diff(want.Clusters, got.Clusters); diff != "" {
		t.Fatalf("%s: clusters differ (-every cluster +skipping):\n%s", what, diff)
	}
	if diff := cmp.Diff(want.Requests, got.Requests, milliRequests); diff != "" {
		t.Fatalf("%s: requests differ (-every cluster +skipping):\n%s", what, diff)
	}
	for name, score := range got.Scores {
		if w, ok := want.Scores[name]; !ok || w != score {
			t.Fatalf("%s: cluster %s scored %d, want %d (feasible %t)", what, name, score, w, ok)
		}
	}
	for name, reasons := range got.Rejected {
		if diff := cmp.Diff(want.Rejected[name], reasons); diff != "" {
			t.Fatalf("%s: cluster %s's reasons differ (-every cluster +skipping):\n%s", what, name, diff)
		}
	}
	if !want.Feasible() {
		if diff := cmp.Diff(want.Rejected, got.Rejected); diff != "" {
			t.Fatalf("%s: nothing fits, but the reasons differ (-every cluster +skipping):\n%s", what, diff)
		}
	}
}

// The ledger over indexes decides as the reference ledger over node
// lists through a run of placements, pods seen, reads, removals and
// expiries.
func TestAssumedDecidesAsTheReference(t *testing.T) {
	for seed := uint64(3000); seed < 3025; seed++ {
		g := newGen(seed)
		ref, clusters, all := g.clusters(1 + g.r.IntN(4))
		names := clusterNames(clusters)
		now := time.Unix(10_000, 0)
		clock := func() time.Time { return now }
		refLedger := newRefAssumed(time.Minute, clock)
		ledger := NewAssumed(time.Minute)
		ledger.now = clock
		var placed []string
		for step := range 60 {
			switch k := g.r.IntN(10); {
			case k < 6:
				name := fmt.Sprintf("app-%d", step)
				a := g.app(name, names, all)
				want, wantErr := refPlaceApp(AppRequest{App: a}, refLedger.Apply(ref))
				if wantErr == nil && want.Feasible() {
					refLedger.Assume(name, want)
				}
				got, err := ledger.PlaceApp(name, AppRequest{App: a}, clusters)
				if fmt.Sprint(err) != fmt.Sprint(wantErr) {
					t.Fatalf("seed %d step %d: error %v, want %v", seed, step, err, wantErr)
				}
				sameChoice(t, fmt.Sprintf("seed %d step %d", seed, step), want, got)
				if got.Feasible() {
					placed = append(placed, name)
				}
			case k == 6 && len(placed) > 0:
				app := placed[g.r.IntN(len(placed))]
				refLedger.Visible(app)
				ledger.Visible(app)
			case k == 7 && len(placed) > 0:
				app := placed[g.r.IntN(len(placed))]
				refLedger.Forget(app)
				ledger.Forget(app)
			case k == 8:
				// A cluster is read again.
				i := g.r.IntN(len(ref))
				ref[i].AsOf = now
				clusters[i].Index.SetAsOf(now)
			default:
				now = now.Add(time.Duration(g.r.IntN(20)) * time.Second)
			}
		}
		if refLen, l := len(refLedger.apps), ledger.Len(); refLen != l {
			t.Fatalf("seed %d: %d assumed, want %d", seed, l, refLen)
		}
	}
}

// The index follows nodes and pods as they change: a node's new labels
// move it between the nodes a component may use, a pod's requests count
// until it goes, a deleted node takes no component.
func TestIndexFollowsChanges(t *testing.T) {
	idx := NewIndex()
	a := MakeNode("a").CPU("4").Obj().Node
	b := MakeNode("b").CPU("4").Arch("arm64").Obj().Node
	idx.UpsertNode(a)
	idx.UpsertNode(b)
	armComp := MakeComp("sense").Arch("arm64").CPU("3").Obj()
	place := func(comp mlsysopsv1.Component) []string {
		t.Helper()
		d, err := idx.Place(Request{App: app(comp), Component: &comp})
		if err != nil {
			t.Fatal(err)
		}
		return d.Nodes
	}
	if got := place(armComp); !cmp.Equal(got, []string{"b"}) {
		t.Fatalf("arm64 component on %v, want b", got)
	}
	// b's pod takes 2 of its 4 CPUs: the 3-CPU component fits nowhere.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{mlsysopsv1.LabelApp: "x", mlsysopsv1.LabelComponent: "c"}},
		Spec: corev1.PodSpec{NodeName: "b", Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}}
	idx.UpsertPod(pod)
	if got := place(armComp); got != nil {
		t.Errorf("with b's pod: on %v, want nowhere", got)
	}
	if n := idx.LivePods("b", "x", "c"); n != 1 {
		t.Errorf("live pods of x/c on b: %d, want 1", n)
	}
	// A status update changes nothing; the pod finishing frees b.
	done := pod.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	idx.UpsertPod(done)
	if got := place(armComp); !cmp.Equal(got, []string{"b"}) {
		t.Errorf("pod done: on %v, want b", got)
	}
	// a becomes arm64 and is emptier than b (the pod is back): it wins.
	idx.UpsertPod(pod)
	a2 := a.DeepCopy()
	a2.Labels[mlsysopsv1.LabelArch] = "arm64"
	idx.UpsertNode(a2)
	if got := place(armComp); !cmp.Equal(got, []string{"a"}) {
		t.Errorf("a relabelled arm64: on %v, want a", got)
	}
	if idx.HasLabel(mlsysopsv1.LabelArch, "amd64") {
		t.Error("amd64 still indexed after a's relabelling")
	}
	idx.DeleteNode("a")
	if got := place(armComp); got != nil || idx.Len() != 1 || idx.Has("a") {
		t.Errorf("a deleted: on %v, %d nodes", got, idx.Len())
	}
	// Pods of a node not seen yet count once it appears.
	idx.DeletePod("ns", "p")
	idx.UpsertPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "early"},
		Spec: corev1.PodSpec{NodeName: "c", Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3500m")}}}}}})
	idx.UpsertNode(MakeNode("c").CPU("4").Arch("arm64").Obj().Node)
	if got := place(armComp); !cmp.Equal(got, []string{"b"}) {
		t.Errorf("c full from its early pod: on %v, want b", got)
	}
}

// Reports update the index in place: nodes come, change and go as the
// reports say, nodes of a kind share one shape on the wire, and a bad
// report changes nothing.
func TestApplyReportFollowsReports(t *testing.T) {
	var nodes []corev1.Node
	for i := range 50 {
		n := MakeNode(fmt.Sprintf("n-%02d", i))
		if i%10 == 0 {
			n.GPU("NVIDIA-L4", 2)
		}
		nodes = append(nodes, *n.Obj().Node)
	}
	rep := Report("c", nodes, nil, time.Now())
	if len(rep.Shapes) != 2 || len(rep.Nodes) != 50 {
		t.Fatalf("%d shapes for %d nodes, want 2 for 50", len(rep.Shapes), len(rep.Nodes))
	}
	idx := NewIndex()
	at := time.Unix(100, 0)
	if err := idx.ApplyReport(rep, at); err != nil {
		t.Fatal(err)
	}
	if idx.Len() != 50 || !idx.AsOf().Equal(at) || !idx.HasLabel(mlsysopsv1.LabelGPUProduct, "NVIDIA-L4") {
		t.Fatalf("after the first report: %d nodes, as of %v", idx.Len(), idx.AsOf())
	}
	if got := idx.Nodes()[3].Labels[mlsysopsv1.LabelHostname]; got != "n-03" {
		t.Errorf("host name label %q, want n-03", got)
	}
	// n-00 loses its GPUs, n-49 goes, n-01 is cordoned.
	nodes[0] = *MakeNode("n-00").Obj().Node
	nodes[1].Spec.Unschedulable = true
	nodes = nodes[:49]
	if err := idx.ApplyReport(Report("c", nodes, nil, time.Now()), at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	gpu := MakeComp("g").GPU("NVIDIA-L4", 1).Obj()
	d, _ := idx.Place(Request{App: app(gpu), Component: &gpu, Explain: true})
	if d.Nodes[0] != "n-10" || d.Rejected["n-00"] != "lack label nvidia.com/gpu.present (want in true)" || d.Rejected["n-01"] != "are cordoned" {
		t.Errorf("after the second report: on %v, n-00 %q, n-01 %q", d.Nodes, d.Rejected["n-00"], d.Rejected["n-01"])
	}
	if idx.Has("n-49") || idx.Len() != 49 {
		t.Errorf("n-49 still there: %d nodes", idx.Len())
	}
	bad := Report("c", nodes[:10], nil, time.Now())
	bad.Shapes[0].Allocatable["cpu"] = "lots"
	if err := idx.ApplyReport(bad, time.Now()); err == nil || idx.Len() != 49 {
		t.Errorf("bad report: %v, %d nodes left", err, idx.Len())
	}
}
