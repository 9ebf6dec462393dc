package description

import (
	"encoding/json"
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description/generic"
	"github.com/mlsysops-go/mlsysops/internal/resources"
)

// Validate checks a typed object, such as one read from the apiserver or
// built in Go, with the same rules the loaders apply: the CRD schema, then
// the semantic rules. Paths start at spec.
func Validate(obj Object) field.ErrorList {
	kind := KindOf(obj)
	root, err := generic.SchemaFor(kind)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("encode %s: %w", kind, err))}
	}
	var doc map[string]interface{}
	if err := utiljson.Unmarshal(data, &doc); err != nil {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("decode %s: %w", kind, err))}
	}
	delete(doc, "metadata")
	_, errs := generic.Walk(nil, doc, root)
	namePath := field.NewPath("metadata", "name")
	if name := obj.GetName(); name == "" {
		errs = append(errs, field.Required(namePath, ""))
	} else {
		check := validation.IsDNS1123Subdomain
		if kind == mlsysopsv1.KindApp {
			check = validation.IsDNS1123Label
		}
		for _, msg := range check(name) {
			errs = append(errs, field.Invalid(namePath, name, msg))
		}
	}
	return append(errs, validateSemantics(obj, field.NewPath("spec"))...)
}

// ValidateApp checks an application with the rules ParseApp applies.
func ValidateApp(app *mlsysopsv1.MLSysOpsApp) field.ErrorList { return Validate(app) }

// KindOf returns the kind of an MLSysOps object, whether or not its
// TypeMeta is set.
func KindOf(obj Object) string {
	switch obj.(type) {
	case *mlsysopsv1.MLSysOpsApp:
		return mlsysopsv1.KindApp
	case *mlsysopsv1.MLSysOpsNode:
		return mlsysopsv1.KindNode
	case *mlsysopsv1.MLSysOpsCluster:
		return mlsysopsv1.KindCluster
	case *mlsysopsv1.MLSysOpsContinuum:
		return mlsysopsv1.KindContinuum
	case *mlsysopsv1.MLSysOpsDatacenter:
		return mlsysopsv1.KindDatacenter
	}
	return obj.GetObjectKind().GroupVersionKind().Kind
}

// validateSemantics applies the rules a schema cannot express: the
// application rules here, the system descriptions' in package generic. It
// stays quiet about empty values: the schema check reports missing required
// fields, and values it rejected arrive here empty.
func validateSemantics(obj Object, p *field.Path) field.ErrorList {
	switch o := obj.(type) {
	case *mlsysopsv1.MLSysOpsApp:
		return validateAppSpec(&o.Spec, p)
	case *mlsysopsv1.MLSysOpsNode:
		return generic.ValidateSpec(mlsysopsv1.KindNode, &o.Spec, p)
	case *mlsysopsv1.MLSysOpsCluster:
		return generic.ValidateSpec(mlsysopsv1.KindCluster, &o.Spec, p)
	case *mlsysopsv1.MLSysOpsContinuum:
		return generic.ValidateSpec(mlsysopsv1.KindContinuum, &o.Spec, p)
	case *mlsysopsv1.MLSysOpsDatacenter:
		return generic.ValidateSpec(mlsysopsv1.KindDatacenter, &o.Spec, p)
	}
	return nil
}

func validateAppSpec(spec *mlsysopsv1.MLSysOpsAppSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	cp := p.Child("components")
	names := make(map[string]int, len(spec.Components))
	for i := range spec.Components {
		name := spec.Components[i].Metadata.Name
		if name == "" {
			continue
		}
		np := cp.Index(i).Child("metadata", "name")
		for _, msg := range validation.IsDNS1035Label(name) {
			errs = append(errs, field.Invalid(np, name, msg+" (the name is used for the component's Deployment and Service)"))
		}
		if _, dup := names[name]; dup {
			errs = append(errs, field.Duplicate(np, name))
			continue
		}
		names[name] = i
	}
	metrics := map[string]bool{}
	for i := range spec.Components {
		errs = append(errs, validateComponent(&spec.Components[i], cp.Index(i), names, metrics)...)
	}
	errs = append(errs, dependencyCycles(spec.Components, names, cp)...)

	if cpl := spec.ClusterPlacement; cpl != nil {
		for i, id := range cpl.ClusterID {
			errs = append(errs, generic.ValidateClusterID(p.Child("cluster_placement", "cluster_id").Index(i), id)...)
		}
	}

	grouped := map[string]int{}
	for i := range spec.SingleNode {
		sn := &spec.SingleNode[i]
		sp := p.Child("single_node").Index(i)
		if len(sn.Components) == 0 {
			errs = append(errs, field.Required(sp.Child("components"), "name the components to run on one node"))
		}
		for j, name := range sn.Components {
			jp := sp.Child("components").Index(j)
			if _, ok := names[name]; !ok {
				errs = append(errs, notFound(jp, name, "no component has this name"))
				continue
			}
			if prev, ok := grouped[name]; ok && prev != i {
				errs = append(errs, field.Invalid(jp, name, fmt.Sprintf("is already in single_node[%d]", prev)))
				continue
			}
			grouped[name] = i
		}
		errs = append(errs, validateNodePlacement(&sn.NodePlacement, sp)...)
	}

	for i, ci := range spec.ComponentInteractions {
		ip := p.Child("component_interactions").Index(i)
		for _, ref := range []struct{ key, name string }{{"component_name1", ci.ComponentName1}, {"component_name2", ci.ComponentName2}} {
			if _, ok := names[ref.name]; ref.name != "" && !ok {
				errs = append(errs, notFound(ip.Child(ref.key), ref.name, "no component has this name"))
			}
		}
		if ci.ComponentName1 != "" && ci.ComponentName1 == ci.ComponentName2 {
			errs = append(errs, field.Invalid(ip.Child("component_name2"), ci.ComponentName2, "must differ from component_name1"))
		}
	}

	if gs := spec.GlobalSatisfaction; gs != nil {
		wp := p.Child("global_satisfaction", "achievement_weights")
		seen := map[string]bool{}
		sum := 0.0
		for i, aw := range gs.AchievementWeights {
			sum += aw.Weight
			if aw.MetricID == "" {
				continue
			}
			if seen[aw.MetricID] {
				errs = append(errs, field.Duplicate(wp.Index(i).Child("metric_id"), aw.MetricID))
			}
			seen[aw.MetricID] = true
			if !metrics[aw.MetricID] {
				errs = append(errs, notFound(wp.Index(i).Child("metric_id"), aw.MetricID, "no component has a qos_metrics entry with this application_metric_id"))
			}
		}
		if sum > 1+1e-9 {
			errs = append(errs, field.Invalid(wp, sum, "the weights must add up to at most 1"))
		}
	}
	return errs
}

func validateComponent(c *mlsysopsv1.Component, p *field.Path, names map[string]int, metrics map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for i, dep := range c.DependsOn {
		dp := p.Child("depends_on").Index(i)
		switch _, ok := names[dep]; {
		case dep == "":
		case dep == c.Metadata.Name:
			errs = append(errs, field.Invalid(dp, dep, "a component cannot depend on itself"))
		case !ok:
			errs = append(errs, notFound(dp, dep, "no component has this name"))
		}
	}
	if c.NodePlacement != nil {
		errs = append(errs, validateNodePlacement(c.NodePlacement, p.Child("node_placement"))...)
	}
	for i, s := range c.Sensors {
		errs = append(errs, generic.OneSensor(p.Child("sensors").Index(i), "camera, temperature, accelerometer, barometer, air_quality",
			s.Camera != nil, s.Temperature != nil, s.Accelerometer != nil, s.Barometer != nil, s.AirQuality != nil)...)
	}
	own := map[string]bool{}
	for i, q := range c.QoSMetrics {
		qp := p.Child("qos_metrics").Index(i)
		if q.ApplicationMetricID != "" {
			if own[q.ApplicationMetricID] {
				errs = append(errs, field.Duplicate(qp.Child("application_metric_id"), q.ApplicationMetricID))
			}
			own[q.ApplicationMetricID] = true
			metrics[q.ApplicationMetricID] = true
		}
		if q.Target != nil && q.Relation == "" {
			errs = append(errs, field.Required(qp.Child("relation"), "a target needs a relation"))
		}
		if q.Target == nil && q.Relation != "" {
			errs = append(errs, field.Required(qp.Child("target"), "a relation needs a target"))
		}
	}
	if c.Storage != nil {
		seen := map[string]bool{}
		for i, b := range c.Storage.Buckets {
			if b.BucketID != "" && seen[b.BucketID] {
				errs = append(errs, field.Duplicate(p.Child("storage", "buckets").Index(i).Child("bucket_id"), b.BucketID))
			}
			seen[b.BucketID] = true
		}
	}
	if archs := resources.Architectures(c); archs != nil && len(archs) == 0 {
		errs = append(errs, field.Invalid(p.Child("containers"), field.OmitValueType{},
			"the containers' platform_requirements.cpu.architecture lists have no architecture in common, so no node can run the component"))
	}
	errs = append(errs, sameModel(p.Child("containers"), c.Containers)...)
	portNames := map[string]bool{}
	portNumbers := map[string]bool{}
	for i := range c.Containers {
		errs = append(errs, validateContainer(&c.Containers[i], p.Child("containers").Index(i), c, portNames, portNumbers)...)
	}
	volumes := map[string]bool{}
	for i, v := range c.Volumes {
		vp := p.Child("volumes").Index(i).Child("name")
		if v.Name == "" {
			continue
		}
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(vp, v.Name, msg))
		}
		if volumes[v.Name] {
			errs = append(errs, field.Duplicate(vp, v.Name))
		}
		volumes[v.Name] = true
	}
	for i := range c.InitContainers {
		ip := p.Child("init_containers").Index(i)
		ct := &c.InitContainers[i]
		errs = append(errs, validateContainer(ct, ip, c, map[string]bool{}, map[string]bool{})...)
		if len(ct.Ports) > 0 {
			errs = append(errs, field.Forbidden(ip.Child("ports"), "an init container runs to completion and serves nothing; declare ports on the containers"))
		}
		if ct.ReadinessProbe != nil {
			errs = append(errs, field.Forbidden(ip.Child("readiness_probe"), "an init container is done when it exits; it has no readiness"))
		}
		errs = append(errs, validateMounts(ct, ip, volumes)...)
	}
	for i := range c.Containers {
		errs = append(errs, validateMounts(&c.Containers[i], p.Child("containers").Index(i), volumes)...)
	}
	return errs
}

// validateMounts checks a container's volume mounts and readiness probe:
// mounts name a volume of the component at an absolute, clean path, once.
func validateMounts(ct *mlsysopsv1.Container, p *field.Path, volumes map[string]bool) field.ErrorList {
	var errs field.ErrorList
	paths := map[string]bool{}
	for i, m := range ct.VolumeMounts {
		mp := p.Child("volume_mounts").Index(i)
		if m.Name != "" && !volumes[m.Name] {
			errs = append(errs, notFound(mp.Child("name"), m.Name, "no volume of the component has this name (declare it under volumes)"))
		}
		if m.MountPath != "" {
			if !path.IsAbs(m.MountPath) || path.Clean(m.MountPath) != m.MountPath || strings.Contains(m.MountPath, "..") {
				errs = append(errs, field.Invalid(mp.Child("mount_path"), m.MountPath, "must be an absolute, clean path without .."))
			}
			if paths[m.MountPath] {
				errs = append(errs, field.Duplicate(mp.Child("mount_path"), m.MountPath))
			}
			paths[m.MountPath] = true
		}
	}
	if pr := ct.ReadinessProbe; pr != nil {
		pp := p.Child("readiness_probe")
		switch {
		case pr.HTTPGet == nil:
			errs = append(errs, field.Required(pp.Child("http_get"), "say how to probe the container"))
		case pr.HTTPGet.Path != "" && !strings.HasPrefix(pr.HTTPGet.Path, "/"):
			errs = append(errs, field.Invalid(pp.Child("http_get", "path"), pr.HTTPGet.Path, "must start with /"))
		}
	}
	return errs
}

func validateContainer(ct *mlsysopsv1.Container, p *field.Path, c *mlsysopsv1.Component, portNames, portNumbers map[string]bool) field.ErrorList {
	var errs field.ErrorList
	if pr := ct.PlatformRequirements; pr != nil {
		pp := p.Child("platform_requirements")
		if pr.CPU != nil {
			errs = append(errs, requestsWithinLimits(pp.Child("cpu"), pr.CPU.Requests, pr.CPU.Limits, 0)...)
		}
		if pr.Memory != nil {
			errs = append(errs, requestsWithinLimits(pp.Child("memory"), pr.Memory.Requests, pr.Memory.Limits, 1<<20)...)
		}
		if g := pr.GPU; g != nil {
			gp := pp.Child("gpu")
			if g.Requests > 0 && g.Limits > 0 && g.Requests != g.Limits {
				errs = append(errs, field.Invalid(gp.Child("requests"), g.Requests, fmt.Sprintf("must equal limits (%d): Kubernetes does not overcommit GPUs", g.Limits)))
			}
			errs = append(errs, generic.Labelable(gp.Child("model"), g.Model)...)
		}
		if f := pr.FPGA; f != nil {
			errs = append(errs, generic.Labelable(pp.Child("fpga", "model"), f.Model)...)
		}
	}
	for i, port := range ct.Ports {
		pp := p.Child("ports").Index(i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if portNames[port.Name] {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			portNames[port.Name] = true
		}
		if port.ContainerPort > 0 {
			proto := port.Protocol
			if proto == "" {
				proto = "TCP"
			}
			key := fmt.Sprintf("%d/%s", port.ContainerPort, proto)
			if portNumbers[key] {
				errs = append(errs, field.Duplicate(pp.Child("container_port"), key))
			}
			portNumbers[key] = true
		}
		if port.HostIP != "" && net.ParseIP(port.HostIP) == nil {
			errs = append(errs, field.Invalid(pp.Child("host_ip"), port.HostIP, "must be an IP address"))
		}
		if c.HostNetwork && port.HostPort != 0 && port.HostPort != port.ContainerPort {
			errs = append(errs, field.Invalid(pp.Child("host_port"), port.HostPort, "must equal container_port when host_network is set"))
		}
	}
	envNames := map[string]bool{}
	for i, env := range ct.Env {
		ep := p.Child("env").Index(i)
		if env.Name != "" {
			for _, msg := range validation.IsEnvVarName(env.Name) {
				errs = append(errs, field.Invalid(ep.Child("name"), env.Name, msg))
			}
			if envNames[env.Name] {
				errs = append(errs, field.Duplicate(ep.Child("name"), env.Name))
			}
			envNames[env.Name] = true
		}
		if env.ValueFrom == nil {
			continue
		}
		if env.Value != "" {
			errs = append(errs, field.Invalid(ep.Child("value_from"), field.OmitValueType{}, "set either value or value_from, not both"))
		}
		if env.ValueFrom.FieldRef == nil {
			errs = append(errs, field.Required(ep.Child("value_from", "field_ref"), "value_from needs field_ref"))
		} else if fp := env.ValueFrom.FieldRef.FieldPath; fp != "" && !validFieldPath(fp) {
			errs = append(errs, field.NotSupported(ep.Child("value_from", "field_ref", "field_path"), fp, envFieldPaths))
		}
	}
	return errs
}

// envFieldPaths are the pod fields Kubernetes can put in an environment
// variable (plus metadata.labels['key'] and metadata.annotations['key']).
var envFieldPaths = []string{
	"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
}

var labelFieldPath = regexp.MustCompile(`^metadata\.(labels|annotations)\['[^']+'\]$`)

func validFieldPath(fp string) bool {
	return slices.Contains(envFieldPaths, fp) || labelFieldPath.MatchString(fp)
}

// requestsWithinLimits checks a requests/limits pair; floor, if set, is the
// smallest sensible value (1Mi of memory: a bare "4" means 4 bytes).
func requestsWithinLimits(p *field.Path, requests, limits *resource.Quantity, floor int64) field.ErrorList {
	var errs field.ErrorList
	for _, q := range []struct {
		key string
		v   *resource.Quantity
	}{{"requests", requests}, {"limits", limits}} {
		if q.v == nil {
			continue
		}
		if q.v.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child(q.key), q.v.String(), "must not be negative"))
		} else if floor > 0 && q.v.Sign() > 0 && q.v.Value() < floor {
			errs = append(errs, field.Invalid(p.Child(q.key), q.v.String(), "is less than 1Mi; write a unit, such as 512Mi or 4Gi"))
		}
	}
	if requests != nil && limits != nil && requests.Cmp(*limits) > 0 {
		errs = append(errs, field.Invalid(p.Child("requests"), requests.String(), fmt.Sprintf("must be less than or equal to limits (%s)", limits.String())))
	}
	return errs
}

func validateNodePlacement(np *mlsysopsv1.NodePlacement, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, generic.ValidateLabels(p.Child("labels"), np.Labels)...)
	if np.Node != "" {
		for _, msg := range validation.IsDNS1123Subdomain(np.Node) {
			errs = append(errs, field.Invalid(p.Child("node"), np.Node, msg))
		}
	}
	return errs
}

// dependencyCycles reports every cycle in depends_on once.
func dependencyCycles(comps []mlsysopsv1.Component, names map[string]int, p *field.Path) field.ErrorList {
	const (
		unvisited = iota
		active
		done
	)
	state := make([]int, len(comps))
	var (
		errs  field.ErrorList
		stack []int
		seen  = map[string]bool{}
		visit func(i int)
	)
	visit = func(i int) {
		state[i] = active
		stack = append(stack, i)
		for _, dep := range comps[i].DependsOn {
			j, ok := names[dep]
			if !ok || j == i {
				continue
			}
			switch state[j] {
			case unvisited:
				visit(j)
			case active:
				cycle := cycleFrom(stack, j, comps)
				if key := canonicalCycle(cycle); !seen[key] {
					seen[key] = true
					errs = append(errs, field.Invalid(p.Index(i).Child("depends_on"), field.OmitValueType{},
						"dependency cycle: "+strings.Join(append(cycle, cycle[0]), " -> ")))
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
	}
	for i := range comps {
		if state[i] == unvisited && comps[i].Metadata.Name != "" && names[comps[i].Metadata.Name] == i {
			visit(i)
		}
	}
	return errs
}

func cycleFrom(stack []int, start int, comps []mlsysopsv1.Component) []string {
	var out []string
	for k := len(stack) - 1; k >= 0; k-- {
		out = append([]string{comps[stack[k]].Metadata.Name}, out...)
		if stack[k] == start {
			break
		}
	}
	return out
}

func canonicalCycle(cycle []string) string {
	sorted := append([]string(nil), cycle...)
	sort.Strings(sorted)
	return strings.Join(sorted, "\x00")
}

// sameModel reports containers of one component (one pod, one node) that
// ask for different GPU or FPGA models.
func sameModel(p *field.Path, containers []mlsysopsv1.Container) field.ErrorList {
	var errs field.ErrorList
	gpu, fpga := "", ""
	for i, ct := range containers {
		pr := ct.PlatformRequirements
		if pr == nil {
			continue
		}
		if pr.GPU != nil && pr.GPU.Model != "" {
			if gpu != "" && pr.GPU.Model != gpu {
				errs = append(errs, field.Invalid(p.Index(i).Child("platform_requirements", "gpu", "model"), pr.GPU.Model,
					fmt.Sprintf("another container of the component asks for %s; a component's containers share one node", gpu)))
			}
			gpu = pr.GPU.Model
		}
		if pr.FPGA != nil && pr.FPGA.Model != "" {
			if fpga != "" && pr.FPGA.Model != fpga {
				errs = append(errs, field.Invalid(p.Index(i).Child("platform_requirements", "fpga", "model"), pr.FPGA.Model,
					fmt.Sprintf("another container of the component asks for %s; a component's containers share one node", fpga)))
			}
			fpga = pr.FPGA.Model
		}
	}
	return errs
}

func notFound(p *field.Path, v, detail string) *field.Error {
	return &field.Error{Type: field.ErrorTypeNotFound, Field: p.String(), BadValue: v, Detail: detail}
}
