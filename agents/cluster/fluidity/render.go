package fluidity

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/resources"
)

// Objects are the Kubernetes objects of one component.
type Objects struct {
	Deployment *appsv1.Deployment
	// Service is nil when nothing talks to the component and it has no
	// external access.
	Service *corev1.Service
}

// Render builds the objects of one component placed on nodes. The pods get
// the component's node requirements plus a required affinity to exactly
// these nodes, requests and limits (GPUs included), runtime class, env
// (with the addresses of the components it talks to), ports and labels.
//
// comp is the component as it runs (Override.Effective). A non-empty
// override is recorded on the Deployment and sets the replicas
// (Override.Replicas); replicas pinned to several nodes are spread over
// all of them.
func Render(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, nodes []string, ov *Override) (Objects, error) {
	if len(nodes) == 0 {
		return Objects{}, fmt.Errorf("component %s: no nodes chosen", comp.Metadata.Name)
	}
	name := members.ObjectName(comp.Metadata.Name)
	ns := members.Namespace(app.Name)
	labels := map[string]string{
		mlsysopsv1.LabelApp:       app.Name,
		mlsysopsv1.LabelComponent: comp.Metadata.Name,
		mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue,
	}
	selector := map[string]string{mlsysopsv1.LabelApp: app.Name, mlsysopsv1.LabelComponent: comp.Metadata.Name}
	sorted := append([]string(nil), nodes...)
	sort.Strings(sorted)

	reqs := resources.NodeSelectorRequirements(&app.Spec, comp)
	reqs = withHostnames(reqs, sorted)
	for _, r := range reqs {
		if r.Key == mlsysopsv1.LabelHostname && len(r.Values) == 0 {
			return Objects{}, fmt.Errorf("component %s: chosen nodes %v exclude the node its node_placement names", comp.Metadata.Name, sorted)
		}
	}
	pod := corev1.PodSpec{
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}},
			},
		}},
		RuntimeClassName: resources.RuntimeClassName(comp),
		Tolerations:      resources.Tolerations(comp),
		HostNetwork:      comp.HostNetwork,
		// Deployments only run pods that restart always; upstream's
		// OnFailure and Never are honoured in spirit: the container is
		// restarted when it stops.
		RestartPolicy: corev1.RestartPolicyAlways,
		// Spread replicas over the chosen nodes.
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: mlsysopsv1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
		}},
	}
	for _, v := range comp.Volumes {
		vol := corev1.Volume{Name: v.Name}
		ed := &corev1.EmptyDirVolumeSource{}
		if v.EmptyDir != nil {
			if v.EmptyDir.SizeLimit != nil {
				q := v.EmptyDir.SizeLimit.DeepCopy()
				ed.SizeLimit = &q
			}
			if v.EmptyDir.Memory {
				ed.Medium = corev1.StorageMediumMemory
			}
		}
		vol.EmptyDir = ed
		pod.Volumes = append(pod.Volumes, vol)
	}
	for i, c := range comp.InitContainers {
		ct := container(c, members.DNSLabel(fmt.Sprintf("%s-init-%d", comp.Metadata.Name, i)), nil)
		ct.Ports = nil
		pod.InitContainers = append(pod.InitContainers, ct)
	}
	if comp.HostNetwork {
		pod.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	peers := peerEnv(app, comp)
	for i, c := range comp.Containers {
		pod.Containers = append(pod.Containers, container(c, containerName(comp, i), peers))
	}
	replicas := ov.Replicas(&app.Spec, comp)
	annotations := map[string]string{mlsysopsv1.AnnotationNodes: strings.Join(sorted, ","), mlsysopsv1.AnnotationSpecHash: SpecHash(comp)}
	if !ov.Empty() {
		annotations[mlsysopsv1.AnnotationOverride] = ov.Encode()
		if ov.Pinned() && len(sorted) > 1 {
			// A plan asked for the component on each of these nodes.
			pod.TopologySpreadConstraints[0].WhenUnsatisfiable = corev1.DoNotSchedule
		}
	}
	dep := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, Labels: labels,
			Annotations: annotations,
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{
				// Make before break: a new pod is Ready before an old one goes.
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr(intstr.FromInt32(0)), MaxSurge: ptr(intstr.FromInt32(1)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       pod,
			},
		},
	}
	objs := Objects{Deployment: dep}
	if HasService(app, comp) {
		svc := &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec:       corev1.ServiceSpec{Selector: selector, Type: corev1.ServiceTypeClusterIP},
		}
		if comp.ExternalAccess {
			svc.Spec.Type = corev1.ServiceTypeNodePort
		}
		for _, c := range comp.Containers {
			for _, p := range c.Ports {
				sp := corev1.ServicePort{
					Name: portName(p), Port: p.ContainerPort, Protocol: protocol(p.Protocol),
					TargetPort: intstr.FromInt32(p.ContainerPort),
				}
				svc.Spec.Ports = append(svc.Spec.Ports, sp)
			}
		}
		objs.Service = svc
	}
	return objs, nil
}

// HasService reports whether the component gets a Service: another
// component talks to it, or it is reachable from outside, and it has
// ports. It does not depend on the nodes the component runs on.
func HasService(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component) bool {
	if !needsService(app, comp) {
		return false
	}
	for _, c := range comp.Containers {
		if len(c.Ports) > 0 {
			return true
		}
	}
	return false
}

// container renders one container (or init container) of a component,
// with the peers' addresses in its environment first.
func container(c mlsysopsv1.Container, name string, peers []corev1.EnvVar) corev1.Container {
	ct := corev1.Container{
		Name:      name,
		Image:     c.Image,
		Command:   c.Command,
		Args:      c.Args,
		Resources: resources.ContainerResources(c.PlatformRequirements),
	}
	if c.ImagePullPolicy != "" {
		ct.ImagePullPolicy = corev1.PullPolicy(c.ImagePullPolicy)
	}
	for _, p := range c.Ports {
		cp := corev1.ContainerPort{Name: p.Name, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIP: p.HostIP, Protocol: protocol(p.Protocol)}
		ct.Ports = append(ct.Ports, cp)
	}
	ct.Env = append(ct.Env, peers...)
	for _, e := range c.Env {
		ev := corev1.EnvVar{Name: e.Name, Value: e.Value}
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			ev.Value = ""
			ev.ValueFrom = &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: e.ValueFrom.FieldRef.FieldPath}}
		}
		ct.Env = append(ct.Env, ev)
	}
	for _, m := range c.VolumeMounts {
		ct.VolumeMounts = append(ct.VolumeMounts, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly})
	}
	if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil {
		ct.ReadinessProbe = &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: p.HTTPGet.Path, Port: intstr.FromInt32(p.HTTPGet.Port), Scheme: corev1.URISchemeHTTP,
			}},
			InitialDelaySeconds: p.InitialDelaySeconds, PeriodSeconds: p.PeriodSeconds,
			TimeoutSeconds: p.TimeoutSeconds, FailureThreshold: p.FailureThreshold,
		}
	}
	return ct
}

// withHostnames adds "hostname in nodes" to the requirements, intersecting
// with a hostname requirement already there (node_placement.node).
func withHostnames(reqs []corev1.NodeSelectorRequirement, nodes []string) []corev1.NodeSelectorRequirement {
	out := make([]corev1.NodeSelectorRequirement, 0, len(reqs)+1)
	allowed := nodes
	for _, r := range reqs {
		if r.Key == mlsysopsv1.LabelHostname && r.Operator == corev1.NodeSelectorOpIn {
			var both []string
			for _, n := range nodes {
				for _, v := range r.Values {
					if n == v {
						both = append(both, n)
					}
				}
			}
			allowed = both
			continue
		}
		out = append(out, r)
	}
	out = append(out, corev1.NodeSelectorRequirement{Key: mlsysopsv1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: allowed})
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// needsService reports whether another component talks to comp, or comp
// is reachable from outside.
func needsService(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component) bool {
	if comp.ExternalAccess {
		return true
	}
	for _, in := range app.Spec.ComponentInteractions {
		if target(in) == comp.Metadata.Name {
			return true
		}
	}
	return false
}

// target is the component that receives the traffic of an interaction:
// component_name2 of an egress from component_name1, or component_name1
// of an ingress into it from component_name2.
func target(in mlsysopsv1.ComponentInteraction) string {
	if in.Type == "ingress" {
		return in.ComponentName1
	}
	return in.ComponentName2
}

func source(in mlsysopsv1.ComponentInteraction) string {
	if in.Type == "ingress" {
		return in.ComponentName2
	}
	return in.ComponentName1
}

// peerEnv gives a component the address of every component it talks to:
// MLSYSOPS_PEER_<NAME>_HOST and, when the peer has ports, _PORT.
func peerEnv(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component) []corev1.EnvVar {
	var out []corev1.EnvVar
	seen := map[string]bool{}
	for _, in := range app.Spec.ComponentInteractions {
		if source(in) != comp.Metadata.Name || seen[target(in)] {
			continue
		}
		peerName := target(in)
		seen[peerName] = true
		var peer *mlsysopsv1.Component
		for i := range app.Spec.Components {
			if app.Spec.Components[i].Metadata.Name == peerName {
				peer = &app.Spec.Components[i]
			}
		}
		if peer == nil {
			continue
		}
		key := "MLSYSOPS_PEER_" + envKey(peerName)
		out = append(out, corev1.EnvVar{Name: key + "_HOST", Value: members.ServiceHost(app.Name, peerName)})
		for _, c := range peer.Containers {
			if len(c.Ports) > 0 {
				out = append(out, corev1.EnvVar{Name: key + "_PORT", Value: strconv.Itoa(int(c.Ports[0].ContainerPort))})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func envKey(s string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func containerName(comp *mlsysopsv1.Component, i int) string {
	if len(comp.Containers) == 1 {
		return members.DNSLabel(comp.Metadata.Name)
	}
	return members.DNSLabel(fmt.Sprintf("%s-%d", comp.Metadata.Name, i))
}

func portName(p mlsysopsv1.ContainerPort) string {
	if p.Name != "" {
		return members.DNSLabel(p.Name)
	}
	return fmt.Sprintf("%s-%d", strings.ToLower(string(protocol(p.Protocol))), p.ContainerPort)
}

func protocol(p string) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return corev1.Protocol(strings.ToUpper(p))
}

func ptr[T any](v T) *T { return &v }
