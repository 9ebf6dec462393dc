package cluster

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

func TestFirstSeenWait(t *testing.T) {
	var f firstSeen
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		app  string
		now  time.Time
		want time.Duration
	}{
		{"a", t0, 5 * time.Second},
		{"a", t0.Add(2 * time.Second), 3 * time.Second},
		{"b", t0.Add(2 * time.Second), 5 * time.Second},
		{"a", t0.Add(9 * time.Second), 0},
	} {
		if got := f.wait(c.app, 5*time.Second, c.now); got != c.want {
			t.Errorf("wait(%s, %v) = %v, want %v", c.app, c.now.Sub(t0), got, c.want)
		}
	}
	f.forget("a")
	if got := f.wait("a", 5*time.Second, t0.Add(20*time.Second)); got != 5*time.Second {
		t.Errorf("after forget: %v, want the whole delay again", got)
	}
}

// TestFirstStatusWaitsWhileStarting: an application's first status is
// not written while its components start, unless it is already Running
// (or fits nowhere); once the delay has passed, Deploying is written, and
// later statuses at once.
func TestFirstStatusWaitsWhileStarting(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	starting := map[string]*mlsysopsv1.ComponentStatus{"worker": {Name: "worker", Cluster: "c1", Replicas: 1, Nodes: []string{"n1"}}}
	ready := map[string]*mlsysopsv1.ComponentStatus{"worker": {Name: "worker", Cluster: "c1", Replicas: 1, ReadyReplicas: 1, Nodes: []string{"n1"}}}
	for _, c := range []struct {
		name          string
		statuses      map[string]*mlsysopsv1.ComponentStatus
		unschedulable bool
		delay         time.Duration
		wantPhase     mlsysopsv1.AppPhase
		wantWait      bool
	}{
		{"starting: nothing written yet", starting, false, time.Minute, "", true},
		{"running at once: written", ready, false, time.Minute, mlsysopsv1.AppRunning, false},
		{"fits nowhere: written", starting, true, time.Minute, mlsysopsv1.AppUnschedulable, false},
		{"starting past the delay: written", starting, false, 0, mlsysopsv1.AppDeploying, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := demoApp()
			kc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(app).WithStatusSubresource(app).Build()
			r := NewAppReconciler(kc, "c1", quiet())
			r.FirstStatusDelay = c.delay
			wait, err := r.writeStatus(ctx, app, c.statuses, c.unschedulable)
			if err != nil {
				t.Fatal(err)
			}
			got := &mlsysopsv1.MLSysOpsApp{}
			if err := kc.Get(ctx, client.ObjectKeyFromObject(app), got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != c.wantPhase || (wait > 0) != c.wantWait {
				t.Errorf("phase %q, wait %v; want phase %q, a wait %v", got.Status.Phase, wait, c.wantPhase, c.wantWait)
			}
			if c.wantPhase == "" {
				// Once a status is there, the next is written at once.
				got.Status.Phase = mlsysopsv1.AppDeploying
				if _, err := r.writeStatus(ctx, got, ready, false); err != nil {
					t.Fatal(err)
				}
				if err := kc.Get(ctx, client.ObjectKeyFromObject(app), got); err != nil || got.Status.Phase != mlsysopsv1.AppRunning {
					t.Errorf("next status: phase %q (%v), want Running", got.Status.Phase, err)
				}
			}
		})
	}
}
