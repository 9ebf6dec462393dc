package cluster

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// podBuilder makes component pods for the tests.
type podBuilder struct{ p corev1.Pod }

func makePod(name, app, comp string) *podBuilder {
	return &podBuilder{p: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			mlsysopsv1.LabelApp: app, mlsysopsv1.LabelComponent: comp, mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}},
		Spec:   corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.40.1.7"},
	}}
}

func (b *podBuilder) ports(ps ...corev1.ContainerPort) *podBuilder {
	b.p.Spec.Containers = append(b.p.Spec.Containers, corev1.Container{Name: "c", Ports: ps})
	return b
}
func (b *podBuilder) ip(ip string) *podBuilder            { b.p.Status.PodIP = ip; return b }
func (b *podBuilder) phase(p corev1.PodPhase) *podBuilder { b.p.Status.Phase = p; return b }
func (b *podBuilder) deleting() *podBuilder {
	b.p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	return b
}
func (b *podBuilder) obj() corev1.Pod { return b.p }

func TestScrapeTargets(t *testing.T) {
	metrics := corev1.ContainerPort{Name: "metrics", ContainerPort: 9090}
	app := corev1.ContainerPort{Name: "msg", ContainerPort: 7070}
	pods := []corev1.Pod{
		makePod("server-b", "demo", "server").ports(app, metrics).obj(),
		makePod("server-a", "demo", "server").ip("10.40.2.3").ports(app).ports(corev1.ContainerPort{Name: "Metrics", ContainerPort: 9091}).obj(),
		makePod("no-port", "demo", "client").ports(app).obj(),
		makePod("pending", "demo", "client").ports(metrics).phase(corev1.PodPending).obj(),
		makePod("no-ip", "demo", "client").ports(metrics).ip("").obj(),
		makePod("leaving", "demo", "server").ports(metrics).deleting().obj(),
		makePod("unlabelled", "", "").ports(metrics).obj(),
	}
	want := []messaging.ScrapeTarget{
		{Application: "demo", Component: "server", Pod: "server-a", Address: "10.40.2.3:9091"},
		{Application: "demo", Component: "server", Pod: "server-b", Address: "10.40.1.7:9090"},
	}
	if diff := cmp.Diff(want, ScrapeTargets(pods)); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}

func TestNodeReadings(t *testing.T) {
	m := &messaging.TelemetryReport{Node: "n1", Metrics: map[string]float64{
		"node_load1": 0.5,
		telemetry.Key("demo_server_latency_seconds", telemetry.Labels{"app": "demo", "component": "server", "pod": "s-1"}): 0.2,
		telemetry.Key("odd", telemetry.Labels{"node": "inner"}):                                                            1,
		"broken{": 3,
	}}
	readings, apps := nodeReadings(m)
	wantReadings := []telemetry.Reading{
		{Name: "demo_server_latency_seconds", Labels: telemetry.Labels{"app": "demo", "component": "server", "pod": "s-1", "node": "n1"}, Value: 0.2},
		{Name: "node_load1", Labels: telemetry.Labels{"node": "n1"}, Value: 0.5},
		{Name: "odd", Labels: telemetry.Labels{"exported_node": "inner", "node": "n1"}, Value: 1},
	}
	if diff := cmp.Diff(wantReadings, readings); diff != "" {
		t.Errorf("readings (-want +got):\n%s", diff)
	}
	wantApps := []messaging.MetricSeries{{Name: "demo_server_latency_seconds", Labels: map[string]string{"app": "demo", "component": "server", "pod": "s-1"}, Value: 0.2}}
	if diff := cmp.Diff(wantApps, apps); diff != "" {
		t.Errorf("application series (-want +got):\n%s", diff)
	}
}
