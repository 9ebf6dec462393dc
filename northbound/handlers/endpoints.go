package handlers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	memberclusters "github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/placement"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// members reads the member clusters through Karmada for one request,
// each cluster's nodes at most once, and remembers what could not be read
// as warnings rather than failing the request.
type members struct {
	infra    Infra
	byName   map[string][]placement.Node
	podsBy   map[string][]corev1.Pod
	problems []string
}

// members starts the member cluster reads of one request.
func (a *API) members() *members {
	return &members{infra: a.cfg.Infra, byName: map[string][]placement.Node{}}
}

// nodes returns a cluster's nodes; none when Karmada is not configured or
// the cluster could not be read.
func (m *members) nodes(ctx context.Context, cluster string) []placement.Node {
	if m.infra == nil {
		return nil
	}
	nodes, ok := m.byName[cluster]
	if !ok {
		var err error
		if nodes, err = m.infra.ClusterNodes(ctx, cluster); err != nil {
			m.problems = append(m.problems, fmt.Sprintf("cluster %s: nodes could not be read through Karmada: %v", cluster, err))
		}
		m.byName[cluster] = nodes
	}
	return nodes
}

// services returns the Services of app in a cluster; none when they could
// not be read.
func (m *members) services(ctx context.Context, cluster, app string) []corev1.Service {
	if m.infra == nil {
		return nil
	}
	svcs, err := m.infra.AppServices(ctx, cluster, app)
	if err != nil {
		m.problems = append(m.problems, fmt.Sprintf("cluster %s: services could not be read through Karmada: %v", cluster, err))
	}
	return svcs
}

// warnings says what could not be read.
func (m *members) warnings() []string { return m.problems }

// endpoints lists every port of the Services the cluster agents created
// for the placed components of app, sorted by component, cluster and
// port. A NodePort endpoint gets the address of a node that runs the
// component.
func (a *API) endpoints(ctx context.Context, app string, comps []api.ComponentPlacement, m *members) []api.Endpoint {
	out := []api.Endpoint{}
	placed := map[string]api.ComponentPlacement{} // cluster/component
	var clusters []string
	for _, cp := range comps {
		if cp.Cluster == "" {
			continue
		}
		if !slices.Contains(clusters, cp.Cluster) {
			clusters = append(clusters, cp.Cluster)
		}
		placed[cp.Cluster+"/"+cp.Name] = cp
	}
	for _, cluster := range clusters {
		for _, svc := range m.services(ctx, cluster, app) {
			cp, ok := placed[cluster+"/"+svc.Labels[mlsysopsv1.LabelComponent]]
			if !ok {
				continue
			}
			node := ""
			if svc.Spec.Type == corev1.ServiceTypeNodePort {
				node = memberclusters.NodeAddress(m.nodes(ctx, cluster), cp.Nodes)
			}
			for _, p := range svc.Spec.Ports {
				out = append(out, api.Endpoint(memberclusters.ServiceEndpoint(cluster, cp.Name, cp.ReadyReplicas > 0, &svc, p, node)))
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.Component != y.Component {
			return x.Component < y.Component
		}
		if x.Cluster != y.Cluster {
			return x.Cluster < y.Cluster
		}
		return x.Port < y.Port
	})
	return out
}

// pods returns the pods of app in a cluster; none when they could not be
// read (a warning says so).
func (m *members) pods(ctx context.Context, cluster, app string) []corev1.Pod {
	if m.infra == nil {
		return nil
	}
	key := cluster + "/" + app
	if m.podsBy == nil {
		m.podsBy = map[string][]corev1.Pod{}
	}
	if pods, ok := m.podsBy[key]; ok {
		return pods
	}
	pods, err := m.infra.AppPods(ctx, cluster, app)
	if err != nil {
		m.problems = append(m.problems, fmt.Sprintf("cluster %s: pods could not be read through Karmada: %v", cluster, err))
	}
	m.podsBy[key] = pods
	return pods
}

// podOf is the API's view of a pod.
func podOf(p *corev1.Pod) api.Pod {
	out := api.Pod{Name: p.Name, Node: p.Spec.NodeName, IP: p.Status.PodIP, Phase: string(p.Status.Phase), Reason: p.Status.Reason,
		Message: p.Status.Message, Containers: []api.ContainerState{}, CreatedAt: p.CreationTimestamp.Time}
	if p.DeletionTimestamp != nil {
		out.Phase = "Terminating"
	}
	for _, c := range p.Status.Conditions {
		switch {
		case c.Type == corev1.PodReady:
			out.Ready = c.Status == corev1.ConditionTrue
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && out.Message == "":
			out.Reason, out.Message = c.Reason, c.Message
		}
	}
	args := func(list []corev1.Container) map[string][]string {
		m := map[string][]string{}
		for _, c := range list {
			m[c.Name] = c.Args
		}
		return m
	}
	initArgs, ctrArgs := args(p.Spec.InitContainers), args(p.Spec.Containers)
	for _, cs := range p.Status.InitContainerStatuses {
		out.InitContainers = append(out.InitContainers, containerStateOf(cs, initArgs[cs.Name]))
	}
	for _, cs := range p.Status.ContainerStatuses {
		out.Containers = append(out.Containers, containerStateOf(cs, ctrArgs[cs.Name]))
	}
	return out
}

func containerStateOf(cs corev1.ContainerStatus, args []string) api.ContainerState {
	out := api.ContainerState{Name: cs.Name, Args: args, Ready: cs.Ready, RestartCount: cs.RestartCount}
	switch s := cs.State; {
	case s.Terminated != nil:
		code := s.Terminated.ExitCode
		out.State, out.Reason, out.Message, out.ExitCode = "terminated", s.Terminated.Reason, strings.TrimSpace(s.Terminated.Message), &code
	case s.Running != nil:
		out.State = "running"
	case s.Waiting != nil:
		out.State, out.Reason, out.Message = "waiting", s.Waiting.Reason, s.Waiting.Message
	default:
		out.State = "waiting"
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		out.LastTermination = strings.TrimSpace(fmt.Sprintf("%s (exit code %d) %s", t.Reason, t.ExitCode, t.Message))
	}
	return out
}
