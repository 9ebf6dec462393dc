package placement

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// The bound of a cluster is never below the score placement gives it,
// whatever is counted beyond the index (more used, or freed).
func TestBoundIsAtLeastTheScore(t *testing.T) {
	checked := 0
	for seed := uint64(5000); seed < 5300; seed++ {
		g := newGen(seed)
		_, clusters, all := g.clusters(1 + g.r.IntN(5))
		names := clusterNames(clusters)
		a := g.app("app", names, all)
		a.ClusterPlacement = nil
		comps := make([]*compiled, len(a.Components))
		var err error
		for i := range a.Components {
			if comps[i], err = compile(a, &a.Components[i]); err != nil {
				break
			}
		}
		if err != nil {
			continue
		}
		for i := range clusters {
			c := &clusters[i]
			var extra Usage
			if g.chance(0.5) {
				extra = Usage{}
				for _, n := range c.Index.Nodes() {
					if g.chance(0.3) {
						sign := int64(1)
						if g.chance(0.3) {
							sign = -1
						}
						extra.Add(n.Name, corev1.ResourceList{
							corev1.ResourceCPU:     *resource.NewMilliQuantity(int64(g.r.IntN(4000)), resource.DecimalSI),
							corev1.ResourceMemory:  *resource.NewQuantity(int64(g.r.IntN(8))<<30, resource.BinarySI),
							mlsysopsv1.ResourceGPU: *resource.NewQuantity(int64(g.r.IntN(3)), resource.DecimalSI),
						}, sign)
					}
				}
			}
			reasons, score, _ := evaluateCluster(AppRequest{App: a}, c, comps, extra)
			if len(reasons) > 0 {
				continue
			}
			checked++
			if b := boundCluster(c, comps, extra); b < score {
				t.Fatalf("seed %d, cluster %s: bound %d below the score %d", seed, c.Name, b, score)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d feasible clusters checked", checked)
	}
}

// Over many clusters, placement skips most of them and still chooses as
// evaluating every cluster does.
func TestPlaceAppSkipsClustersThatCannotWin(t *testing.T) {
	evaluated, total := 0, 0
	for seed := uint64(6000); seed < 6060; seed++ {
		g := newGen(seed)
		_, clusters, all := g.clusters(20 + g.r.IntN(20))
		names := clusterNames(clusters)
		req := AppRequest{App: g.app("app", names, all)}
		req.Explain = true
		want, wantErr := PlaceApp(req, clusters)
		req.Explain = false
		got, err := PlaceApp(req, clusters)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("seed %d: error %v, want %v", seed, err, wantErr)
		}
		sameChoice(t, fmt.Sprintf("seed %d", seed), want, got)
		if want.Feasible() {
			evaluated += len(got.Scores)
			total += len(want.Scores)
		}
	}
	t.Logf("feasible clusters evaluated: %d of %d", evaluated, total)
	if total == 0 || evaluated*10 > total*9 {
		t.Fatalf("evaluated %d of %d feasible clusters: the bounds skip too few", evaluated, total)
	}
}

// The continuum's many identical clusters: one is evaluated per instance.
func TestPlaceAppIdenticalClusters(t *testing.T) {
	clusters := make([]Cluster, 50)
	for i := range clusters {
		clusters[i] = Cluster{Name: fmt.Sprintf("c-%02d", i), Ready: true, Index: NewIndexOf(manyNodes(fmt.Sprintf("c%02d", i), 20))}
	}
	a := app(MakeComp("infer").GPU("NVIDIA-H100-80GB-HBM3", 2).Obj(), MakeComp("ui").CPU("1").Replicas(2).Obj())
	d, err := PlaceApp(AppRequest{App: a}, clusters)
	if err != nil || !d.Feasible() {
		t.Fatal(err, d.Reason())
	}
	if len(d.Clusters) != 1 || d.Clusters[0] != "c-00" {
		t.Fatalf("chose %v, want [c-00]", d.Clusters)
	}
	if len(d.Scores) > 2 {
		t.Fatalf("evaluated %d clusters: %v", len(d.Scores), d.Scores)
	}
}
