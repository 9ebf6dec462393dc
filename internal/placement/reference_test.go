package placement

// The placement of the previous version, before the index: every call
// converted every node. Kept verbatim in what it decides, so that
// equivalence tests can show the index decides the same on generated
// inputs (TestIndexDecidesAsTheReference and friends).

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/resources"
)

type refCompiled struct {
	reqs      []corev1.NodeSelectorRequirement
	perPod    corev1.ResourceList
	res       []corev1.ResourceName
	want      []int64
	gpus      int64
	fpga      bool
	minFreqHz int64
	runtime   string
	nvidiaRC  bool
}

func refCompile(req Request) (*refCompiled, error) {
	c := &refCompiled{reqs: resources.NodeSelectorRequirements(req.App, req.Component), perPod: PodRequests(req.Component)}
	if i := slices.IndexFunc(c.reqs, func(r corev1.NodeSelectorRequirement) bool { return r.Key == mlsysopsv1.LabelGPUMemory }); i >= 0 {
		c.reqs = append(append(slices.Clone(c.reqs[:i]), c.reqs[i+1:]...), c.reqs[i])
	}
	for _, r := range c.reqs {
		if err := checkRequirement(r); err != nil {
			return nil, fmt.Errorf("component %s: node requirement %s: %w", req.Component.Metadata.Name, r.Key, err)
		}
	}
	c.res = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, mlsysopsv1.ResourceGPU, corev1.ResourcePods}
	var extra []corev1.ResourceName
	for name := range c.perPod {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != mlsysopsv1.ResourceGPU && name != corev1.ResourcePods {
			extra = append(extra, name)
		}
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
	c.res = append(c.res, extra...)
	c.want = make([]int64, len(c.res))
	for i, name := range c.res {
		q := c.perPod[name]
		c.want[i] = q.MilliValue()
	}
	g := c.perPod[mlsysopsv1.ResourceGPU]
	c.gpus = g.Value()
	for _, ct := range req.Component.Containers {
		if pr := ct.PlatformRequirements; pr != nil {
			c.fpga = c.fpga || pr.FPGA != nil
			if pr.CPU != nil && pr.CPU.Frequency > c.minFreqHz {
				c.minFreqHz = pr.CPU.Frequency
			}
		}
	}
	c.runtime = req.Component.ContainerRuntime
	c.nvidiaRC = req.Component.RuntimeClassName == "nvidia" || req.Component.RuntimeClassName == "nvidia-experimental"
	return c, nil
}

type refState struct{ alloc, used []int64 }

func (c *refCompiled) state(n *Node) refState {
	st := refState{alloc: make([]int64, len(c.res)), used: make([]int64, len(c.res))}
	for i, name := range c.res {
		if q, ok := n.Node.Status.Allocatable[name]; ok {
			st.alloc[i] = q.MilliValue()
		}
		if q, ok := n.Requested[name]; ok {
			st.used[i] = q.MilliValue()
		}
	}
	return st
}

func (c *refCompiled) fits(n *Node, st refState) string {
	node := n.Node
	if !nodeReady(node) {
		return "are not Ready"
	}
	if node.Spec.Unschedulable {
		return "are cordoned"
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return fmt.Sprintf("have the untolerated taint %s", t.ToString())
		}
	}
	for _, r := range c.reqs {
		if !matches(r, node.Labels) {
			have, ok := node.Labels[r.Key]
			if r.Key == mlsysopsv1.LabelGPUMemory && r.Operator == corev1.NodeSelectorOpGt && len(r.Values) == 1 {
				need, _ := strconv.ParseInt(r.Values[0], 10, 64)
				if !ok {
					return fmt.Sprintf("do not say their GPU memory (label %s); the component needs GPUs of at least %d MiB", r.Key, need+1)
				}
				return fmt.Sprintf("have GPUs of %s MiB, too small: the component needs GPUs of at least %d MiB", have, need+1)
			}
			if !ok {
				return fmt.Sprintf("lack label %s (want %s %s)", r.Key, strings.ToLower(string(r.Operator)), strings.Join(r.Values, ","))
			}
			return fmt.Sprintf("have %s=%s (want %s %s)", r.Key, have, strings.ToLower(string(r.Operator)), strings.Join(r.Values, ","))
		}
	}
	if d := n.Description; d != nil {
		if c.minFreqHz > 0 && d.Hardware != nil && d.Hardware.CPU != nil && len(d.Hardware.CPU.Frequency) > 0 {
			if maxHz := maxOf(d.Hardware.CPU.Frequency); maxHz < c.minFreqHz {
				return fmt.Sprintf("run their CPU at most at %.2f GHz (want %.2f GHz)", float64(maxHz)/1e9, float64(c.minFreqHz)/1e9)
			}
		}
		if c.runtime != "" && len(d.Environment.ContainerRuntime) > 0 && !contains(d.Environment.ContainerRuntime, c.runtime) {
			return fmt.Sprintf("lack container runtime %s", c.runtime)
		}
	}
	if c.nvidiaRC && node.Labels[mlsysopsv1.LabelGPUPresent] != "true" {
		return "have no NVIDIA GPU for runtime class nvidia"
	}
	for i, want := range c.want {
		if want > 0 && st.alloc[i]-st.used[i] < want {
			return fmt.Sprintf("have insufficient %s", c.res[i])
		}
	}
	return ""
}

func (c *refCompiled) score(n *Node, st refState) int64 {
	least := 0.0
	for _, r := range []int{colCPU, colMemory} {
		if st.alloc[r] == 0 {
			continue
		}
		left := 1 - float64(st.used[r]+c.want[r])/float64(st.alloc[r])
		least += math.Max(0, left) / 2
	}
	total := 40 * least
	hasGPU := st.alloc[colGPU] > 0
	switch {
	case c.gpus > 0:
		fill := float64(st.used[colGPU]+c.want[colGPU]) / float64(st.alloc[colGPU])
		total += 40 * math.Min(1, fill)
	case hasGPU:
	default:
		total += 40
	}
	fpgaNode := n.Node.Labels[mlsysopsv1.LabelFPGAPresent] == "true"
	if c.fpga || !fpgaNode {
		total += 10
	}
	if d := n.Description; d != nil && d.Hardware != nil && d.Hardware.CPU != nil && d.Hardware.CPU.PerformanceIndicator != nil {
		total += 10 * math.Min(1, *d.Hardware.CPU.PerformanceIndicator/4000)
	}
	return int64(math.Round(total))
}

func (c *refCompiled) hasRoom(st refState) bool {
	for i, want := range c.want {
		if want > 0 && st.alloc[i]-st.used[i] < want {
			return false
		}
	}
	return true
}

// refPlaceComponent is PlaceComponent before the index.
func refPlaceComponent(req Request, nodes []Node) (Decision, error) {
	d := Decision{Assignment: map[string]int32{}, Rejected: map[string]string{}, Scores: map[string]int64{}}
	c, err := refCompile(req)
	if err != nil {
		return d, err
	}
	replicas := req.Replicas
	if replicas <= 0 {
		replicas = Replicas(req.App, req.Component)
	}
	states := make([]refState, len(nodes))
	feasible := make([]bool, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if why, ok := req.Exclude[n.Name()]; ok {
			d.Rejected[n.Name()] = why
			continue
		}
		states[i] = c.state(n)
		if why := c.fits(n, states[i]); why != "" {
			d.Rejected[n.Name()] = why
			continue
		}
		feasible[i] = true
		d.Scores[n.Name()] = c.score(n, states[i])
	}
	for r := int32(0); r < replicas; r++ {
		best, bestScore := -1, int64(-1)
		for i := range nodes {
			if !feasible[i] {
				continue
			}
			if r > 0 && !c.hasRoom(states[i]) {
				continue
			}
			s := c.score(&nodes[i], states[i])
			if s > bestScore || (s == bestScore && nodes[i].Name() < nodes[best].Name()) {
				best, bestScore = i, s
			}
		}
		if best < 0 {
			d.Unplaced = replicas - r
			break
		}
		name := nodes[best].Name()
		if d.Assignment[name] == 0 {
			d.Nodes = append(d.Nodes, name)
		}
		d.Assignment[name]++
		for k, w := range c.want {
			states[best].used[k] += w
		}
	}
	return d, nil
}

// refCluster is the Cluster of the previous version: nodes as a list.
type refCluster struct {
	Name                                    string
	Ready                                   bool
	Continent, Country, City, CloudProvider string
	Nodes                                   []Node
	AsOf                                    time.Time
}

// refPlaceApp is PlaceApp before the index.
func refPlaceApp(req AppRequest, clusters []refCluster) (ClusterDecision, error) {
	d := ClusterDecision{Rejected: map[string][]string{}, Scores: map[string]int64{}}
	cp := req.App.ClusterPlacement
	wanted := map[string]int{}
	if cp != nil {
		for i, id := range cp.ClusterID {
			if id != "*" {
				wanted[id] = i
			}
		}
	}
	type cand struct {
		name  string
		score int64
		took  map[string]corev1.ResourceList
	}
	var cands []cand
	for i := range clusters {
		c := &clusters[i]
		reasons, score, took, err := refEvaluateCluster(req, c, wanted)
		if err != nil {
			return d, err
		}
		if len(reasons) > 0 {
			d.Rejected[c.Name] = reasons
			continue
		}
		if pos, ok := wanted[c.Name]; ok {
			score += int64(len(wanted) - pos)
		}
		d.Scores[c.Name] = score
		cands = append(cands, cand{c.Name, score, took})
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].score != cands[j].score {
			return cands[i].score > cands[j].score
		}
		return cands[i].name < cands[j].name
	})
	n := 1
	if cp != nil && cp.Instances > 0 {
		n = int(cp.Instances)
	}
	for i := 0; i < len(cands) && i < n; i++ {
		d.Clusters = append(d.Clusters, cands[i].name)
		if d.Requests == nil {
			d.Requests = map[string]map[string]corev1.ResourceList{}
		}
		d.Requests[cands[i].name] = cands[i].took
	}
	return d, nil
}

func refEvaluateCluster(req AppRequest, c *refCluster, wanted map[string]int) ([]string, int64, map[string]corev1.ResourceList, error) {
	var reasons []string
	if why, ok := req.Exclude[c.Name]; ok {
		return []string{why}, 0, nil, nil
	}
	if !c.Ready {
		return []string{"not Ready in Karmada"}, 0, nil, nil
	}
	if len(wanted) > 0 {
		if _, ok := wanted[c.Name]; !ok {
			return []string{"not in cluster_placement.cluster_id"}, 0, nil, nil
		}
	}
	if cp := req.App.ClusterPlacement; cp != nil {
		if cp.CloudProvider != "" && cp.CloudProvider != c.CloudProvider {
			reasons = append(reasons, fmt.Sprintf("cloud provider %q, want %q", c.CloudProvider, cp.CloudProvider))
		}
		if loc := cp.Location; loc != nil {
			if len(loc.Continent) > 0 && !containsFold(loc.Continent, c.Continent) {
				reasons = append(reasons, fmt.Sprintf("continent %q not in %v", c.Continent, loc.Continent))
			}
			if len(loc.Country) > 0 && !containsFold(loc.Country, c.Country) {
				reasons = append(reasons, fmt.Sprintf("country %q not in %v", c.Country, loc.Country))
			}
			if len(loc.City) > 0 && !containsFold(loc.City, c.City) {
				reasons = append(reasons, fmt.Sprintf("city %q not in %v", c.City, loc.City))
			}
		}
		for _, acc := range cp.Accelerators {
			if !refHasAccelerator(c.Nodes, acc) {
				reasons = append(reasons, fmt.Sprintf("no node with accelerator %s", acc))
			}
		}
		if len(cp.NodeTypes) > 0 && !refHasLayer(c.Nodes, cp.NodeTypes) {
			reasons = append(reasons, fmt.Sprintf("no node of type %v", cp.NodeTypes))
		}
	}
	if len(reasons) > 0 {
		return reasons, 0, nil, nil
	}
	nodes := refCopyNodes(c.Nodes)
	took := map[string]corev1.ResourceList{}
	var score int64
	for i := range req.App.Components {
		comp := &req.App.Components[i]
		dec, err := refPlaceComponent(Request{App: req.App, Component: comp}, nodes)
		if err != nil {
			return nil, 0, nil, err
		}
		if !dec.Feasible() {
			reasons = append(reasons, fmt.Sprintf("component %s: %s", comp.Metadata.Name, dec.Reason()))
			continue
		}
		best := int64(0)
		for _, n := range dec.Nodes {
			best = max(best, dec.Scores[n])
		}
		score += best
		per := PodRequests(comp)
		for i := range nodes {
			name := nodes[i].Name()
			for k := int32(0); k < dec.Assignment[name]; k++ {
				if took[name] == nil {
					took[name] = corev1.ResourceList{}
				}
				for res, q := range per {
					add(nodes[i].Requested, res, q)
					add(took[name], res, q)
				}
			}
		}
	}
	if len(reasons) > 0 {
		return reasons, 0, nil, nil
	}
	if n := len(req.App.Components); n > 0 {
		score /= int64(n)
	}
	return nil, score * 100, took, nil
}

func refHasAccelerator(nodes []Node, acc string) bool {
	for i := range nodes {
		l := nodes[i].Node.Labels
		switch acc {
		case "gpu":
			if l[mlsysopsv1.LabelGPUPresent] == "true" {
				return true
			}
		case "fpga":
			if l[mlsysopsv1.LabelFPGAPresent] == "true" {
				return true
			}
		case "tpu":
			if l[mlsysopsv1.LabelTPUPresent] == "true" {
				return true
			}
		}
	}
	return false
}

func refHasLayer(nodes []Node, layers []mlsysopsv1.ContinuumLayer) bool {
	for i := range nodes {
		for _, l := range layers {
			if l == mlsysopsv1.LayerAny || nodes[i].Node.Labels[mlsysopsv1.LabelLayer] == string(l) {
				return true
			}
		}
	}
	return false
}

func refCopyNodes(in []Node) []Node {
	out := make([]Node, len(in))
	for i := range in {
		out[i] = in[i]
		out[i].Requested = in[i].Requested.DeepCopy()
		if out[i].Requested == nil {
			out[i].Requested = corev1.ResourceList{}
		}
	}
	return out
}

// matches evaluates one node selector requirement against node labels,
// with the semantics of Kubernetes node affinity.
func matches(r corev1.NodeSelectorRequirement, labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return ok && contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !ok || !contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !ok {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

// refAssumed is the Assumed ledger before the index.
type refAssumed struct {
	TTL  time.Duration
	apps map[string]*refAssumption
	now  func() time.Time
}

type refAssumption struct {
	requests map[string]map[string]corev1.ResourceList
	at       time.Time
	visible  time.Time
}

func newRefAssumed(ttl time.Duration, now func() time.Time) *refAssumed {
	return &refAssumed{TTL: ttl, apps: map[string]*refAssumption{}, now: now}
}

func (a *refAssumed) Assume(app string, d ClusterDecision) {
	if len(d.Requests) == 0 {
		delete(a.apps, app)
		return
	}
	a.apps[app] = &refAssumption{requests: d.Requests, at: a.now()}
}

func (a *refAssumed) Visible(app string) {
	if as, ok := a.apps[app]; ok && as.visible.IsZero() {
		as.visible = a.now()
	}
}

func (a *refAssumed) Forget(app string) { delete(a.apps, app) }

func (a *refAssumed) Apply(clusters []refCluster) []refCluster {
	now := a.now()
	out := make([]refCluster, len(clusters))
	for i := range clusters {
		c := clusters[i]
		var nodes []Node
		for app, as := range a.apps {
			if now.Sub(as.at) > a.TTL {
				delete(a.apps, app)
				continue
			}
			req, ok := as.requests[c.Name]
			if !ok {
				continue
			}
			if !as.visible.IsZero() && c.AsOf.After(as.visible) {
				delete(as.requests, c.Name)
				if len(as.requests) == 0 {
					delete(a.apps, app)
				}
				continue
			}
			if nodes == nil {
				nodes = refCopyNodes(c.Nodes)
			}
			for j := range nodes {
				for res, q := range req[nodes[j].Name()] {
					add(nodes[j].Requested, res, q)
				}
			}
		}
		if nodes != nil {
			c.Nodes = nodes
		}
		out[i] = c
	}
	return out
}
