package continuum_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

// TestStatusReportsAheadOfKarmada: the placement controller takes a
// cluster agent's status report (application_status_report) for that
// cluster's status while Karmada's ResourceBinding shows none (no cluster
// agent runs in this package, so the member copy never gets one): the
// application is Running on the report alone, Degraded on a later report
// of fewer ready replicas; a report delivered late (sent before the one
// held) and one of a cluster outside the placement change nothing.
func TestStatusReportsAheadOfKarmada(t *testing.T) {
	reported := continuum.NewMemberStatuses(continuum.MemberStatusTTL)
	c := startControllersWith(t, continuum.ControllersOptions{Reported: reported})
	ctx := context.Background()
	name := "reported-" + rand.String(5)
	app := &mlsysopsv1.MLSysOpsApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace},
		Spec: mlsysopsv1.MLSysOpsAppSpec{Name: name, ClusterPlacement: &mlsysopsv1.ClusterPlacement{ClusterID: []string{"cloud-1"}}, Components: []mlsysopsv1.Component{{
			Metadata: mlsysopsv1.ComponentMetadata{Name: "web"}, Containers: []mlsysopsv1.Container{{Image: "registry.example/web:1"}},
		}}},
	}
	if err := c.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), app) })
	waitApp(t, c, name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppDeploying })

	report := func(cluster string, ready int32, at time.Time) *messaging.ApplicationStatusReport {
		return &messaging.ApplicationStatusReport{Application: name, Cluster: cluster, Phase: "Running", Time: at,
			Components: map[string]messaging.ComponentStatus{"web": {Phase: "Ready", Nodes: []string{"cloud-cpu-1"}, Replicas: 2, ReadyReplicas: ready}}}
	}
	t1 := time.Now()
	// A cluster outside the placement first: the application stays
	// Deploying with no component of edge-1.
	reported.Put(report("edge-1", 2, t1))
	if !reported.Put(report("cloud-1", 2, t1)) {
		t.Fatal("report refused")
	}
	got := waitApp(t, c, name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppRunning })
	if len(got.Status.Components) != 1 || got.Status.Components[0].Cluster != "cloud-1" || got.Status.Components[0].ReadyReplicas != 2 ||
		len(got.Status.Components[0].Nodes) != 1 || got.Status.Components[0].Nodes[0] != "cloud-cpu-1" {
		t.Errorf("components %+v, want web on cloud-1 with 2 ready replicas on cloud-cpu-1", got.Status.Components)
	}
	if reported.Put(report("cloud-1", 0, t1.Add(-time.Second))) {
		t.Error("a report sent before the one held replaced it")
	}
	if !reported.Put(report("cloud-1", 1, t1.Add(time.Second))) {
		t.Fatal("later report refused")
	}
	got = waitApp(t, c, name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppDegraded })
	if len(got.Status.Components) != 1 || got.Status.Components[0].ReadyReplicas != 1 {
		t.Errorf("components %+v, want web with 1 ready replica", got.Status.Components)
	}
	if _, accepted, used := reported.Counts(); accepted != 3 || used == 0 {
		t.Errorf("reports accepted %d used %d, want 3 accepted and some used", accepted, used)
	}
}
