package handlers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// eventInfra serves the events of member clusters; the rest of Infra is
// not used.
type eventInfra struct {
	Infra
	events map[string][]corev1.Event
	reads  map[string]int
}

func (f *eventInfra) AppEvents(_ context.Context, cluster, _ string) ([]corev1.Event, error) {
	f.reads[cluster]++
	if cluster == "down" {
		return nil, errors.New("connection refused")
	}
	return f.events[cluster], nil
}

func kevent(at time.Time, kind, name, reason, msg string, count int32) corev1.Event {
	return corev1.Event{
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name}, Reason: reason, Message: msg, Type: corev1.EventTypeNormal,
		LastTimestamp: metav1.NewTime(at), Count: count,
	}
}

func TestEvents(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	f := &eventInfra{reads: map[string]int{}, events: map[string][]corev1.Event{
		"cloud-1": {
			kevent(t0, "MLSysOpsApp", "shop", "PlanAccepted", "plan p1 of policy relocateComponents: server move (latency 0.9 misses)", 1),
			kevent(t0.Add(20*time.Second), "MLSysOpsApp", "shop", "PlanCompleted", "plan p1 completed", 0),
		},
		"edge-1": {kevent(t0.Add(10*time.Second), "Deployment", "cache", "PlanRefused", "plan p2 refused", 3)},
	}}
	a := &API{cfg: Config{Infra: f}}
	comps := []api.ComponentPlacement{
		{Name: "server", Cluster: "cloud-1"}, {Name: "client", Cluster: "cloud-1"},
		{Name: "cache", Cluster: "edge-1"}, {Name: "db", Cluster: "down"}, {Name: "unplaced"},
	}
	m := a.members()
	got := a.events(context.Background(), "shop", comps, m)
	want := []api.Event{
		{Time: t0, Cluster: "cloud-1", Type: "Normal", Reason: "PlanAccepted", Object: "MLSysOpsApp/shop",
			Message: "plan p1 of policy relocateComponents: server move (latency 0.9 misses)", Count: 1},
		{Time: t0.Add(10 * time.Second), Cluster: "edge-1", Type: "Normal", Reason: "PlanRefused", Object: "Deployment/cache", Message: "plan p2 refused", Count: 3},
		{Time: t0.Add(20 * time.Second), Cluster: "cloud-1", Type: "Normal", Reason: "PlanCompleted", Object: "MLSysOpsApp/shop", Message: "plan p1 completed", Count: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"cloud-1": 1, "edge-1": 1, "down": 1}, f.reads); diff != "" {
		t.Errorf("reads (-want +got):\n%s", diff)
	}
	if w := m.warnings(); len(w) != 1 || w[0] != "cluster down: events could not be read through Karmada: connection refused" {
		t.Errorf("warnings %q", w)
	}

	// Only the latest are kept.
	f.events = map[string][]corev1.Event{}
	for i := 0; i < maxEvents+5; i++ {
		f.events["cloud-1"] = append(f.events["cloud-1"], kevent(t0.Add(time.Duration(i)*time.Second), "MLSysOpsApp", "shop", "PlanAccepted", fmt.Sprint(i), 1))
	}
	got = a.events(context.Background(), "shop", comps[:1], a.members())
	if len(got) != maxEvents || got[0].Message != "5" || got[maxEvents-1].Message != fmt.Sprint(maxEvents+4) {
		t.Errorf("%d events from %q to %q, want the latest %d", len(got), got[0].Message, got[len(got)-1].Message, maxEvents)
	}
	if got := (&API{}).events(context.Background(), "shop", comps, (&API{}).members()); len(got) != 0 {
		t.Errorf("without Karmada: %+v", got)
	}
}
