package placement

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/resources"
)

// compiled is a component's request prepared once for any number of
// nodes, in any number of clusters: what node filters and scores compare
// with each node's precomputed features.
type compiled struct {
	reqs []corev1.NodeSelectorRequirement
	// ints holds the integer of each Gt and Lt requirement.
	ints      []int64
	perPod    corev1.ResourceList
	perPodVec vec
	// checks are the resources a replica needs, in the order a reason
	// names the first that is short: cpu, memory, GPUs, pods, then the
	// others by name.
	checks    []resCheck
	wantCPU   int64
	wantMem   int64
	wantGPU   int64
	gpus      int64
	fpga      bool
	minFreqHz int64
	runtime   string
	nvidiaRC  bool
	replicas  int32
	// tolerations the component's pods carry (resources.Tolerations).
	tolerations []corev1.Toleration
}

type resCheck struct {
	col  int
	name corev1.ResourceName
	want int64
}

func compile(app *mlsysopsv1.MLSysOpsAppSpec, comp *mlsysopsv1.Component) (*compiled, error) {
	c := &compiled{reqs: resources.NodeSelectorRequirements(app, comp), perPod: PodRequests(comp), replicas: Replicas(app, comp),
		tolerations: resources.Tolerations(comp)}
	// The GPU's memory is judged last, so that a node without a GPU says
	// that rather than that it has no GPU memory.
	if i := slices.IndexFunc(c.reqs, func(r corev1.NodeSelectorRequirement) bool { return r.Key == mlsysopsv1.LabelGPUMemory }); i >= 0 {
		c.reqs = append(append(slices.Clone(c.reqs[:i]), c.reqs[i+1:]...), c.reqs[i])
	}
	c.ints = make([]int64, len(c.reqs))
	for i, r := range c.reqs {
		if err := checkRequirement(r); err != nil {
			return nil, fmt.Errorf("component %s: node requirement %s: %w", comp.Metadata.Name, r.Key, err)
		}
		if r.Operator == corev1.NodeSelectorOpGt || r.Operator == corev1.NodeSelectorOpLt {
			c.ints[i], _ = strconv.ParseInt(r.Values[0], 10, 64)
		}
	}
	c.perPodVec = vecOf(c.perPod)
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, mlsysopsv1.ResourceGPU, corev1.ResourcePods}
	var extra []corev1.ResourceName
	for name := range c.perPod {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != mlsysopsv1.ResourceGPU && name != corev1.ResourcePods {
			extra = append(extra, name)
		}
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
	for _, name := range append(names, extra...) {
		q := c.perPod[name]
		if want := q.MilliValue(); want > 0 {
			c.checks = append(c.checks, resCheck{col: column(name), name: name, want: want})
		}
	}
	c.wantCPU, c.wantMem, c.wantGPU = c.perPodVec.at(colCPU), c.perPodVec.at(colMemory), c.perPodVec.at(colGPU)
	g := c.perPod[mlsysopsv1.ResourceGPU]
	c.gpus = g.Value()
	for _, ct := range comp.Containers {
		if pr := ct.PlatformRequirements; pr != nil {
			c.fpga = c.fpga || pr.FPGA != nil
			if pr.CPU != nil && pr.CPU.Frequency > c.minFreqHz {
				c.minFreqHz = pr.CPU.Frequency
			}
		}
	}
	c.runtime = comp.ContainerRuntime
	c.nvidiaRC = comp.RuntimeClassName == "nvidia" || comp.RuntimeClassName == "nvidia-experimental"
	return c, nil
}

// A nodeFilter rejects the nodes that cannot take one more replica of a
// component. reject returns 0 when the node passes, else a detail (> 0)
// that why turns into the reason ("are not Ready", "have insufficient
// cpu"), phrased to follow "N node(s)".
type nodeFilter struct {
	name   string
	reject func(c *compiled, e *entry, used vec) int
	why    func(c *compiled, e *entry, detail int) string
}

// nodeFilters run in this order; the first that rejects a node gives
// its reason. A new filter (a node feature placement should respect) is
// one more entry: what it reads of a node belongs in entry, computed
// when the node changes, not here.
var nodeFilters = []nodeFilter{
	{
		name:   "ready",
		reject: func(_ *compiled, e *entry, _ vec) int { return boolDetail(!e.ready) },
		why:    func(*compiled, *entry, int) string { return "are not Ready" },
	},
	{
		name:   "unschedulable",
		reject: func(_ *compiled, e *entry, _ vec) int { return boolDetail(e.cordon) },
		why:    func(*compiled, *entry, int) string { return "are cordoned" },
	},
	{
		name: "taints",
		reject: func(c *compiled, e *entry, _ vec) int {
			for i := range e.hard {
				if !tolerates(c.tolerations, &e.hard[i]) {
					return i + 1
				}
			}
			return 0
		},
		why: func(_ *compiled, e *entry, detail int) string {
			return "have the untolerated taint " + e.taints[detail-1]
		},
	},
	{
		name: "labels",
		reject: func(c *compiled, e *entry, _ vec) int {
			for i := range c.reqs {
				if !c.matches(i, e.labels) {
					return i + 1
				}
			}
			return 0
		},
		why: func(c *compiled, e *entry, detail int) string {
			r := c.reqs[detail-1]
			if r.Key == mlsysopsv1.LabelGPUMemory && r.Operator == corev1.NodeSelectorOpGt && len(r.Values) == 1 {
				// Say it in the words of a model that does not fit.
				need := c.ints[detail-1] + 1
				if have, ok := e.labels[r.Key]; ok {
					return fmt.Sprintf("have GPUs of %s MiB, too small: the component needs GPUs of at least %d MiB", have, need)
				}
				return fmt.Sprintf("do not say their GPU memory (label %s); the component needs GPUs of at least %d MiB", r.Key, need)
			}
			want := strings.ToLower(string(r.Operator)) + " " + strings.Join(r.Values, ",")
			if have, ok := e.labels[r.Key]; ok {
				return "have " + r.Key + "=" + have + " (want " + want + ")"
			}
			return "lack label " + r.Key + " (want " + want + ")"
		},
	},
	{
		name: "cpuFrequency",
		reject: func(c *compiled, e *entry, _ vec) int {
			return boolDetail(c.minFreqHz > 0 && e.hasFreq && e.maxFreqHz < c.minFreqHz)
		},
		why: func(c *compiled, e *entry, _ int) string {
			return fmt.Sprintf("run their CPU at most at %.2f GHz (want %.2f GHz)", float64(e.maxFreqHz)/1e9, float64(c.minFreqHz)/1e9)
		},
	},
	{
		name: "containerRuntime",
		reject: func(c *compiled, e *entry, _ vec) int {
			return boolDetail(c.runtime != "" && len(e.runtimes) > 0 && !contains(e.runtimes, c.runtime))
		},
		why: func(c *compiled, _ *entry, _ int) string { return "lack container runtime " + c.runtime },
	},
	{
		name:   "runtimeClass",
		reject: func(c *compiled, e *entry, _ vec) int { return boolDetail(c.nvidiaRC && !e.gpuNode) },
		why:    func(*compiled, *entry, int) string { return "have no NVIDIA GPU for runtime class nvidia" },
	},
	{
		name: "resources",
		reject: func(c *compiled, e *entry, used vec) int {
			for i, r := range c.checks {
				if e.alloc.at(r.col)-used.at(r.col) < r.want {
					return i + 1
				}
			}
			return 0
		},
		why: func(c *compiled, _ *entry, detail int) string {
			return "have insufficient " + string(c.checks[detail-1].name)
		},
	},
}

func boolDetail(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rejectBy returns the index of the first filter rejecting the node and
// its detail; -1 when the node can take a replica.
func (c *compiled) rejectBy(e *entry, used vec) (filter, detail int) {
	for i := range nodeFilters {
		if d := nodeFilters[i].reject(c, e, used); d != 0 {
			return i, d
		}
	}
	return -1, 0
}

// hasRoom reports whether a node that passed the filters still has the
// resources for one more replica.
func (c *compiled) hasRoom(e *entry, used vec) bool {
	for _, r := range c.checks {
		if e.alloc.at(r.col)-used.at(r.col) < r.want {
			return false
		}
	}
	return true
}

// matches evaluates requirement i against node labels, with the
// semantics of Kubernetes node affinity.
func (c *compiled) matches(i int, labels map[string]string) bool {
	r := &c.reqs[i]
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
		have, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return have > c.ints[i]
		}
		return have < c.ints[i]
	}
	return false
}

// score rates a feasible node from 0 to 100 for one more replica, given
// what is used on it.
func (c *compiled) score(e *entry, used vec) int64 {
	// Spread CPU and memory: prefer the node left least allocated.
	least := 0.0
	if alloc := e.alloc.at(colCPU); alloc != 0 {
		left := 1 - float64(used.at(colCPU)+c.wantCPU)/float64(alloc)
		least += math.Max(0, left) / 2
	}
	if alloc := e.alloc.at(colMemory); alloc != 0 {
		left := 1 - float64(used.at(colMemory)+c.wantMem)/float64(alloc)
		least += math.Max(0, left) / 2
	}
	total := 40 * least
	gpuAlloc := e.alloc.at(colGPU)
	switch {
	case c.gpus > 0:
		// Pack GPU work: prefer the node it fills best, to keep whole
		// GPU nodes free for large jobs.
		fill := float64(used.at(colGPU)+c.wantGPU) / float64(gpuAlloc)
		total += 40 * math.Min(1, fill)
	case gpuAlloc > 0:
		// Keep GPU nodes for GPU work.
	default:
		total += 40
	}
	if c.fpga || !e.fpgaNode {
		total += 10
	}
	if e.hasPerf {
		// A little weight for faster CPUs, saturating at 4000.
		total += e.perf
	}
	return int64(math.Round(total))
}

func tolerates(tols []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(t) {
			return true
		}
	}
	return false
}

// scorePerf is the score's term for a CPU performance indicator.
func scorePerf(p float64) float64 { return 10 * math.Min(1, p/4000) }
