package placement

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// cpuApp is an application of one component asking for cpu per replica.
func cpuApp(name, cpu string, replicas int32) *mlsysopsv1.MLSysOpsAppSpec {
	q := resource.MustParse(cpu)
	return &mlsysopsv1.MLSysOpsAppSpec{Name: name, Components: []mlsysopsv1.Component{{
		Metadata:      mlsysopsv1.ComponentMetadata{Name: "svc"},
		NodePlacement: &mlsysopsv1.NodePlacement{Scaling: &mlsysopsv1.Scaling{Instances: replicas}},
		Containers: []mlsysopsv1.Container{{Image: "svc:1", PlatformRequirements: &mlsysopsv1.PlatformRequirements{
			CPU: &mlsysopsv1.CPURequirements{Requests: &q},
		}}},
	}}}
}

// assumedOn is what the ledger counts of a resource on a node of a
// cluster read at asOf.
func assumedOn(l *Assumed, cluster string, asOf time.Time, node string, res corev1.ResourceName) string {
	q := l.Usage(cluster, asOf).List(node)[res]
	return q.String()
}

// A burst placed on one stale read spreads once the ledger holds what
// earlier placements took: two clusters of 4 CPUs take two 3-CPU apps,
// one each, and refuse the third.
func TestAssumedSpreadsABurstOverStaleCapacity(t *testing.T) {
	stale := []Cluster{cluster("a", MakeNode("a1").CPU("4").Obj()), cluster("b", MakeNode("b1").CPU("4").Obj())}
	l := NewAssumed(time.Minute)
	var chosen []string
	for _, app := range []string{"x", "y", "z"} {
		d, err := l.PlaceApp(app, AppRequest{App: cpuApp(app, "3", 1)}, stale)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Feasible() {
			chosen = append(chosen, "none")
			continue
		}
		chosen = append(chosen, d.Clusters[0])
	}
	if chosen[0] == chosen[1] || chosen[2] != "none" {
		t.Errorf("chosen %v, want two different clusters then none", chosen)
	}
	if l.Len() != 2 {
		t.Errorf("%d assumed, want 2", l.Len())
	}
	for _, c := range stale {
		if got := c.Index.Nodes()[0].Requested[corev1.ResourceCPU]; !got.IsZero() {
			t.Errorf("the ledger modified the index of %s: %s cpu requested", c.Name, got.String())
		}
	}
}

func TestAssumedRecordsEveryReplicaOnItsNode(t *testing.T) {
	clusters := []Cluster{cluster("a", MakeNode("a1").CPU("2").Obj(), MakeNode("a2").CPU("2").Obj())}
	l := NewAssumed(time.Minute)
	d, err := l.PlaceApp("x", AppRequest{App: cpuApp("x", "1500m", 2)}, clusters)
	if err != nil || !d.Feasible() {
		t.Fatalf("decision %+v, err %v", d, err)
	}
	for _, n := range []string{"a1", "a2"} {
		if q := assumedOn(l, "a", time.Time{}, n, corev1.ResourceCPU); q != "1500m" {
			t.Errorf("%s: assumed cpu %s, want 1500m (one replica each)", n, q)
		}
		if q := assumedOn(l, "a", time.Time{}, n, corev1.ResourcePods); q != "1" {
			t.Errorf("%s: assumed pods %s, want 1", n, q)
		}
	}
}

func TestAssumedEnds(t *testing.T) {
	now := time.Unix(1000, 0)
	placeOn := func(l *Assumed, app string, cluster string) {
		l.Assume(app, ClusterDecision{Clusters: []string{cluster}, Requests: map[string]map[string]corev1.ResourceList{
			cluster: {cluster + "1": {corev1.ResourceCPU: resource.MustParse("1")}},
		}})
	}
	cpu := func(l *Assumed, cluster string, asOf time.Time) string {
		return assumedOn(l, cluster, asOf, cluster+"1", corev1.ResourceCPU)
	}
	newLedger := func() *Assumed {
		l := NewAssumed(time.Minute)
		l.now = func() time.Time { return now }
		return l
	}

	t.Run("a read after the pods were seen", func(t *testing.T) {
		l := newLedger()
		placeOn(l, "x", "a")
		now = now.Add(10 * time.Second)
		// Reads taken before the pods are seen, even long after the
		// placement, keep the assumption.
		if got := cpu(l, "a", now); got != "1" {
			t.Errorf("before the pods are seen: cpu %s, want 1", got)
		}
		l.Visible("x")
		if got := cpu(l, "a", now); got != "1" {
			t.Errorf("read as the pods are seen: cpu %s, want 1", got)
		}
		now = now.Add(time.Second)
		l.Visible("x") // again: the first time counts
		if got := cpu(l, "a", now); got != "0" || l.Len() != 0 {
			t.Errorf("read after the pods were seen: cpu %s, %d assumed; want 0, 0", got, l.Len())
		}
	})
	t.Run("only on the cluster read", func(t *testing.T) {
		l := newLedger()
		l.Assume("x", ClusterDecision{Clusters: []string{"a", "b"}, Requests: map[string]map[string]corev1.ResourceList{
			"a": {"a1": {corev1.ResourceCPU: resource.MustParse("1")}},
			"b": {"b1": {corev1.ResourceCPU: resource.MustParse("1")}},
		}})
		l.Visible("x")
		a, b := cpu(l, "a", now.Add(time.Second)), cpu(l, "b", now.Add(-time.Second))
		if a != "0" || b != "1" || l.Len() != 1 {
			t.Errorf("a read fresh, b stale: cpu %s and %s, %d assumed; want 0, 1, 1", a, b, l.Len())
		}
	})
	t.Run("forgotten", func(t *testing.T) {
		l := newLedger()
		placeOn(l, "x", "a")
		l.Forget("x")
		if got := cpu(l, "a", now); got != "0" {
			t.Errorf("forgotten: cpu %s, want 0", got)
		}
	})
	t.Run("moved", func(t *testing.T) {
		l := newLedger()
		placeOn(l, "x", "a")
		placeOn(l, "x", "b")
		if a, b := cpu(l, "a", now), cpu(l, "b", now); a != "0" || b != "1" {
			t.Errorf("moved to b: cpu %s on a, %s on b; want 0, 1", a, b)
		}
	})
	t.Run("expired", func(t *testing.T) {
		l := newLedger()
		placeOn(l, "x", "a")
		now = now.Add(time.Minute)
		if got := cpu(l, "a", time.Time{}); got != "1" {
			t.Errorf("at TTL: cpu %s, want 1", got)
		}
		now = now.Add(time.Millisecond)
		if got := cpu(l, "a", time.Time{}); got != "0" || l.Len() != 0 {
			t.Errorf("past TTL: cpu %s, %d assumed; want 0, 0", got, l.Len())
		}
	})
}

// Placements and reads from several workers at once (run with -race).
func TestAssumedConcurrentUse(t *testing.T) {
	clusters := []Cluster{cluster("a", MakeNode("a1").Obj())}
	l := NewAssumed(time.Minute)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			app := string(rune('a' + i))
			d, err := l.PlaceApp(app, AppRequest{App: cpuApp(app, "100m", 1)}, clusters)
			if err != nil || !d.Feasible() {
				t.Errorf("%s: %+v %v", app, d, err)
				return
			}
			l.Visible(app)
		}()
	}
	wg.Wait()
	if got := assumedOn(l, "a", time.Time{}, "a1", corev1.ResourceCPU); got != "800m" {
		t.Errorf("assumed cpu %s, want 800m", got)
	}
}
