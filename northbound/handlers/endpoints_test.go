package handlers

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/placement"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// memberInfra serves nodes and Services of member clusters; the rest of
// Infra is not used.
type memberInfra struct {
	Infra
	nodes    map[string][]placement.Node
	services map[string][]corev1.Service
	reads    map[string]int
}

func (f *memberInfra) ClusterNodes(_ context.Context, cluster string) ([]placement.Node, error) {
	f.reads["nodes/"+cluster]++
	if cluster == "down" {
		return nil, errors.New("connection refused")
	}
	return f.nodes[cluster], nil
}

func (f *memberInfra) AppServices(_ context.Context, cluster, _ string) ([]corev1.Service, error) {
	f.reads["services/"+cluster]++
	if cluster == "down" {
		return nil, errors.New("connection refused")
	}
	return f.services[cluster], nil
}

func node(name string, addrs ...corev1.NodeAddress) placement.Node {
	return placement.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}}
}

func service(name, comp string, typ corev1.ServiceType, ip string, ports ...corev1.ServicePort) corev1.Service {
	return corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mls-shop", Labels: map[string]string{mlsysopsv1.LabelComponent: comp}},
		Spec:       corev1.ServiceSpec{Type: typ, ClusterIP: ip, Ports: ports},
	}
}

func TestEndpoints(t *testing.T) {
	internal := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}
	external := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.7"}
	f := &memberInfra{
		nodes: map[string][]placement.Node{
			"cloud-1": {node("cloud-1", internal), node("gpu-1", internal, external)},
			"edge-1":  {node("edge-1", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::5"})},
		},
		services: map[string][]corev1.Service{
			"cloud-1": {
				service("model", "model", corev1.ServiceTypeNodePort, "10.96.0.10",
					corev1.ServicePort{Name: "http", Port: 8000, NodePort: 30800, Protocol: corev1.ProtocolTCP},
					corev1.ServicePort{Name: "metrics", Port: 9090, NodePort: 30990, Protocol: corev1.ProtocolUDP}),
				service("stale", "gone", corev1.ServiceTypeClusterIP, "10.96.0.11", corev1.ServicePort{Port: 80}),
			},
			"edge-1": {service("model", "model", corev1.ServiceTypeNodePort, "fd00::a", corev1.ServicePort{Port: 8000, NodePort: 30801})},
		},
		reads: map[string]int{},
	}
	a := &API{cfg: Config{Infra: f}}
	comps := []api.ComponentPlacement{
		{Name: "model", Cluster: "cloud-1", Nodes: []string{"gpu-1"}, Replicas: 1, ReadyReplicas: 1},
		{Name: "model", Cluster: "edge-1", Nodes: []string{"edge-1"}, Replicas: 1},
		{Name: "cache", Cluster: "down", Nodes: []string{"d-1"}},
		{Name: "unplaced"},
	}
	m := a.members()
	got := a.endpoints(context.Background(), "shop", comps, m)
	want := []api.Endpoint{
		{Component: "model", Cluster: "cloud-1", Namespace: "mls-shop", Service: "model", Type: "NodePort", PortName: "http", Protocol: "TCP",
			Port: 8000, ClusterIP: "10.96.0.10", Address: "10.96.0.10:8000", URL: "http://model.mls-shop.svc:8000",
			NodePort: 30800, NodeAddress: "203.0.113.7:30800", ExternalURL: "http://203.0.113.7:30800", Ready: true},
		{Component: "model", Cluster: "cloud-1", Namespace: "mls-shop", Service: "model", Type: "NodePort", PortName: "metrics", Protocol: "UDP",
			Port: 9090, ClusterIP: "10.96.0.10", Address: "10.96.0.10:9090", NodePort: 30990, NodeAddress: "203.0.113.7:30990", Ready: true},
		{Component: "model", Cluster: "edge-1", Namespace: "mls-shop", Service: "model", Type: "NodePort", Protocol: "TCP",
			Port: 8000, ClusterIP: "fd00::a", Address: "[fd00::a]:8000", URL: "http://model.mls-shop.svc:8000",
			NodePort: 30801, NodeAddress: "[fd00::5]:30801", ExternalURL: "http://[fd00::5]:30801"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	if f.reads["nodes/cloud-1"] != 1 || f.reads["services/cloud-1"] != 1 {
		t.Errorf("reads %v, want each cluster's nodes and services read once", f.reads)
	}
	if w := m.warnings(); len(w) != 1 || w[0] != "cluster down: services could not be read through Karmada: connection refused" {
		t.Errorf("warnings %q", w)
	}
	if got := (&API{}).endpoints(context.Background(), "shop", comps, (&API{}).members()); len(got) != 0 {
		t.Errorf("without Karmada: %+v", got)
	}
}

func TestPodOf(t *testing.T) {
	one := int32(1)
	pending := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."},
		}},
	}
	failed := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec: corev1.PodSpec{NodeName: "gpu-1",
			InitContainers: []corev1.Container{{Name: "fetch", Args: []string{"fetch", "--dest", "/models"}}},
			Containers:     []corev1.Container{{Name: "model", Args: []string{"serve"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "fetch", RestartCount: 2,
				State:                corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "checksum mismatch: model.onnx\n"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "checksum mismatch"}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "model", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
		},
	}
	cases := map[string]struct {
		pod  corev1.Pod
		want api.Pod
	}{
		"unschedulable": {pending, api.Pod{Name: "p", Phase: "Pending", Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", Containers: []api.ContainerState{}}},
		"init container failed": {failed, api.Pod{Name: "q", Node: "gpu-1", Phase: "Pending",
			InitContainers: []api.ContainerState{{Name: "fetch", Args: []string{"fetch", "--dest", "/models"}, State: "terminated", Reason: "Error",
				Message: "checksum mismatch: model.onnx", ExitCode: &one, RestartCount: 2, LastTermination: "Error (exit code 1) checksum mismatch"}},
			Containers: []api.ContainerState{{Name: "model", Args: []string{"serve"}, State: "waiting", Reason: "PodInitializing"}}}},
	}
	for name, c := range cases {
		if diff := cmp.Diff(c.want, podOf(&c.pod)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
