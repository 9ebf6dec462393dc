package continuum

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusteragent "github.com/mlsysops-go/mlsysops/agents/cluster"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

func memberApp(name, cluster string, ready int32) *mlsysopsv1.MLSysOpsApp {
	return &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace},
		Status: mlsysopsv1.MLSysOpsAppStatus{Phase: mlsysopsv1.AppDeploying, Components: []mlsysopsv1.ComponentStatus{
			{Name: "web", Cluster: cluster, Nodes: []string{"n1", "n2"}, Replicas: 2, ReadyReplicas: ready},
			{Name: "db", Cluster: cluster, Replicas: 1, ReadyReplicas: 1, Message: "pinned by plan p"},
		}}}
}

// TestStatusReportRoundTrip: what the cluster agent reports reads back as
// the component status it wrote in its member, so that the binding's
// reflection of that status matches the report.
func TestStatusReportRoundTrip(t *testing.T) {
	app := memberApp("a", "edge-1", 1)
	rep := clusteragent.StatusReport("edge-1", app, time.Now())
	if err := rep.Validate(); err != nil {
		t.Fatal(err)
	}
	got := reportComponents(rep)
	want := append([]mlsysopsv1.ComponentStatus(nil), app.Status.Components...)
	sortComponents(want)
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if !sameComponents(got, app.Status.Components) {
		t.Error("sameComponents: a report differs from the status it was made of")
	}
	if rep.Components["web"].Phase != "NotReady" || rep.Components["db"].Phase != "Ready" {
		t.Errorf("phases %+v", rep.Components)
	}
}

func TestMemberStatusesMerge(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	s := NewMemberStatuses(time.Minute)
	s.now = func() time.Time { return now }
	t0 := now.Add(-time.Second)
	stale := memberApp("a", "edge-1", 0).Status.Components
	ready := memberApp("a", "edge-1", 2).Status.Components
	cloud := memberApp("a", "cloud-1", 2).Status.Components

	if !s.Put(clusteragent.StatusReport("edge-1", memberApp("a", "edge-1", 2), t0)) {
		t.Fatal("first report refused")
	}
	if ev := <-s.C; ev.Object.GetName() != "a" || ev.Object.GetNamespace() != mlsysopsv1.Namespace {
		t.Errorf("event for %s/%s", ev.Object.GetNamespace(), ev.Object.GetName())
	}
	// The binding is behind: the report is used for edge-1, the
	// binding's status for cloud-1.
	got := s.Merge("a", []string{"cloud-1", "edge-1"}, map[string][]mlsysopsv1.ComponentStatus{"edge-1": stale, "cloud-1": cloud})
	want := append(append([]mlsysopsv1.ComponentStatus(nil), cloud...), ready...)
	sortComponents(want)
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("binding behind:\n got %+v\nwant %+v", got, want)
	}
	// No binding status at all (none reflected yet): the report.
	if got := s.Merge("a", []string{"edge-1"}, nil); !sameComponents(got, ready) {
		t.Errorf("no binding status: %+v", got)
	}
	// A report sent before the one held (delivered late) is refused.
	if s.Put(clusteragent.StatusReport("edge-1", memberApp("a", "edge-1", 0), t0.Add(-time.Millisecond))) {
		t.Error("an older report replaced a newer one")
	}
	if got := s.Merge("a", []string{"edge-1"}, map[string][]mlsysopsv1.ComponentStatus{"edge-1": stale}); !sameComponents(got, ready) {
		t.Errorf("after the late report: %+v", got)
	}
	// The binding catches up: the report is dropped, and a later
	// binding status is taken as it is.
	if got := s.Merge("a", []string{"edge-1"}, map[string][]mlsysopsv1.ComponentStatus{"edge-1": ready}); !sameComponents(got, ready) {
		t.Errorf("binding caught up: %+v", got)
	}
	if held, accepted, used := s.Counts(); held != 0 || accepted != 1 || used != 3 {
		t.Errorf("counts held %d accepted %d used %d, want 0 1 3", held, accepted, used)
	}
	if got := s.Merge("a", []string{"edge-1"}, map[string][]mlsysopsv1.ComponentStatus{"edge-1": stale}); !sameComponents(got, stale) {
		t.Errorf("after the report was dropped: %+v", got)
	}
	// A report the binding never matches stands for the TTL only.
	s.Put(clusteragent.StatusReport("edge-1", memberApp("a", "edge-1", 2), now))
	now = now.Add(time.Minute + time.Second)
	if got := s.Merge("a", []string{"edge-1"}, map[string][]mlsysopsv1.ComponentStatus{"edge-1": stale}); !sameComponents(got, stale) {
		t.Errorf("expired report used: %+v", got)
	}
	// A report of a cluster outside the placement is not used; Forget
	// drops them all.
	s.Put(clusteragent.StatusReport("far-1", memberApp("a", "far-1", 2), now))
	if got := s.Merge("a", []string{"edge-1"}, map[string][]mlsysopsv1.ComponentStatus{"edge-1": stale}); !sameComponents(got, stale) {
		t.Errorf("report of another cluster used: %+v", got)
	}
	s.Forget("a")
	if held, _, _ := s.Counts(); held != 0 {
		t.Errorf("%d reports held after Forget", held)
	}
}

// TestMemberStatusesNeverBlock: reports keep coming while no controller
// drains the channel.
func TestMemberStatusesNeverBlock(t *testing.T) {
	s := NewMemberStatuses(time.Minute)
	for i := 0; i < cap(s.C)+10; i++ {
		s.Put(&messaging.ApplicationStatusReport{Application: "a", Cluster: "edge-1", Phase: "Running", Time: time.Unix(int64(i), 0)})
	}
	if held, accepted, _ := s.Counts(); held != 1 || accepted != int64(cap(s.C)+10) {
		t.Errorf("held %d accepted %d", held, accepted)
	}
}
