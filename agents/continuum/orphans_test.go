package continuum

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// fakeMembers stands in for the members' copies (the cluster proxy).
type fakeMembers struct {
	copies  map[string][]mlsysopsv1.MLSysOpsApp
	deleted []string
	fail    map[string]bool
}

func (f *fakeMembers) Apps(_ context.Context, cluster string) ([]mlsysopsv1.MLSysOpsApp, error) {
	if f.fail[cluster] {
		return nil, errors.New("cluster " + cluster + " unreadable")
	}
	// A fresh list, as the API server's.
	return append([]mlsysopsv1.MLSysOpsApp(nil), f.copies[cluster]...), nil
}

func (f *fakeMembers) DeleteApp(_ context.Context, cluster, name string, uid types.UID) error {
	f.deleted = append(f.deleted, cluster+"/"+name+"/"+string(uid))
	var kept []mlsysopsv1.MLSysOpsApp
	for _, c := range f.copies[cluster] {
		if c.Name != name || c.UID != uid {
			kept = append(kept, c)
		}
	}
	f.copies[cluster] = kept
	return nil
}

func memberCopy(name, uid string, managed bool) mlsysopsv1.MLSysOpsApp {
	c := mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace, UID: types.UID(uid)}}
	if managed {
		c.Labels = map[string]string{LabelKarmadaManaged: "true"}
	}
	return c
}

func readyCluster(name string, ready bool) *clusterv1alpha1.Cluster {
	st := metav1.ConditionFalse
	if ready {
		st = metav1.ConditionTrue
	}
	return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: st}}}}
}

// TestOrphanSweep is a unit test of the sweep's decisions on a fake
// Karmada API and fake members; the cluster proxy's list and delete run
// against real clusters in test/integration/continuum
// (TestOrphanedMemberCopyDeleted).
func TestOrphanSweep(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	live := &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: mlsysopsv1.Namespace}}
	kc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(readyCluster("cloud", true), readyCluster("edge", false), readyCluster("far", true), live).Build()
	deleting := memberCopy("deleting", "u-del", true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	deleting.Finalizers = []string{mlsysopsv1.Finalizer}
	m := &fakeMembers{copies: map[string][]mlsysopsv1.MLSysOpsApp{
		"cloud": {memberCopy("live", "u-live", true), memberCopy("gone", "u-gone", true), memberCopy("mine", "u-mine", false), deleting},
		// Not Ready: never swept.
		"edge": {memberCopy("gone-edge", "u-edge", true)},
		"far":  {memberCopy("gone-far", "u-far", true)},
	}, fail: map[string]bool{}}
	now := time.Unix(1000, 0)
	o := &OrphanSweeper{Karmada: kc, Members: m, Grace: time.Minute, Log: quiet(), Now: func() time.Time { return now }}
	ctx := context.Background()
	sweep := func(want ...string) {
		t.Helper()
		got, err := o.Sweep(ctx)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("at +%s: deleted %v (%v); want %v", now.Sub(time.Unix(1000, 0)), got, err, want)
		}
	}
	// First seen: candidates, nothing deleted.
	sweep()
	now = now.Add(30 * time.Second)
	sweep()
	// far cannot be read at the grace's end: skipped, its candidate kept.
	m.fail["far"] = true
	now = now.Add(31 * time.Second)
	sweep("cloud/gone")
	if strings.Join(m.deleted, ",") != "cloud/gone/u-gone" {
		t.Errorf("deleted %v; want the orphan only, by its uid", m.deleted)
	}
	m.fail["far"] = false
	sweep("far/gone-far")
	// Created again with another uid: a new candidate, its own grace.
	m.copies["cloud"] = append(m.copies["cloud"], memberCopy("gone", "u-gone-2", true))
	sweep()
	now = now.Add(59 * time.Second)
	sweep()
	// The application comes back to Karmada meanwhile: no longer a
	// candidate, kept.
	back := &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: mlsysopsv1.Namespace}}
	if err := kc.Create(ctx, back); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	sweep()
	if err := kc.Delete(ctx, back); err != nil {
		t.Fatal(err)
	}
	// Its grace starts over.
	sweep()
	now = now.Add(61 * time.Second)
	sweep("cloud/gone")
	for _, c := range m.copies["cloud"] {
		if c.Name != "live" && c.Name != "mine" && c.Name != "deleting" {
			t.Errorf("left in cloud: %s", c.Name)
		}
	}
	if len(m.copies["edge"]) != 1 {
		t.Errorf("a copy in a cluster that is not Ready was deleted: %v", m.copies["edge"])
	}
}
