package placement

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// summary bounds what the nodes of an index can score, so that cluster
// placement skips the clusters that cannot outrank the ones it has
// already chosen (see placeApp): over all nodes, and over the nodes of
// each GPU model, architecture and layer (summaryKeys), which most
// components ask for. It is computed from the index the first time a
// decision needs it after a change, and dropped by every change: a
// continuum applies a cluster's report once per report and decides many
// times in between.
type summary struct {
	all nodeStat
	// byLabel holds, by summary key then label value, the nodes with it.
	byLabel map[string]map[string]*nodeStat
}

// summaryKeys are the labels a summary groups nodes by.
var summaryKeys = []string{mlsysopsv1.LabelGPUProduct, mlsysopsv1.LabelGPUPresent, mlsysopsv1.LabelArch, mlsysopsv1.LabelLayer}

// nodeStat bounds the score's terms over some nodes.
type nodeStat struct {
	// maxLeftCPU and maxLeftMem are the largest fraction of a node's CPU
	// or memory not requested (1 - used/allocatable), over the nodes that
	// have some; maxAllocCPU and maxAllocMem the largest allocatable.
	maxLeftCPU, maxLeftMem   float64
	maxAllocCPU, maxAllocMem int64
	// maxGPUFill is the largest fraction of a node's GPUs requested and
	// minGPUAlloc the fewest GPUs (milli) a node has, over the nodes with
	// GPUs (minGPUAlloc 0: none).
	maxGPUFill  float64
	minGPUAlloc int64
	// noGPUNode says some node has no GPUs (the score's term for keeping
	// GPU nodes free goes to such nodes).
	noGPUNode bool
	maxPerf   float64
	// maxFree is the most of each of the resources placement always
	// tracks (columns colCPU to colPods) a node has not requested.
	maxFree [colPods + 1]int64
}

func newNodeStat() *nodeStat {
	s := &nodeStat{maxLeftCPU: math.Inf(-1), maxLeftMem: math.Inf(-1)}
	for i := range s.maxFree {
		s.maxFree[i] = math.MinInt64
	}
	return s
}

// add counts one more node.
func (s *nodeStat) add(e *entry) {
	for i := range s.maxFree {
		s.maxFree[i] = max(s.maxFree[i], e.alloc.at(i)-e.used.at(i))
	}
	if a := e.alloc.at(colCPU); a > 0 {
		s.maxLeftCPU = math.Max(s.maxLeftCPU, 1-float64(e.used.at(colCPU))/float64(a))
		s.maxAllocCPU = max(s.maxAllocCPU, a)
	}
	if a := e.alloc.at(colMemory); a > 0 {
		s.maxLeftMem = math.Max(s.maxLeftMem, 1-float64(e.used.at(colMemory))/float64(a))
		s.maxAllocMem = max(s.maxAllocMem, a)
	}
	if a := e.alloc.at(colGPU); a > 0 {
		s.maxGPUFill = math.Max(s.maxGPUFill, float64(e.used.at(colGPU))/float64(a))
		if s.minGPUAlloc == 0 || a < s.minGPUAlloc {
			s.minGPUAlloc = a
		}
	} else {
		s.noGPUNode = true
	}
	if e.hasPerf {
		s.maxPerf = math.Max(s.maxPerf, e.perf)
	}
}

// merge makes s bound the nodes o bounds too.
func (s *nodeStat) merge(o *nodeStat) {
	s.maxLeftCPU, s.maxLeftMem = math.Max(s.maxLeftCPU, o.maxLeftCPU), math.Max(s.maxLeftMem, o.maxLeftMem)
	s.maxAllocCPU, s.maxAllocMem = max(s.maxAllocCPU, o.maxAllocCPU), max(s.maxAllocMem, o.maxAllocMem)
	s.maxGPUFill = math.Max(s.maxGPUFill, o.maxGPUFill)
	if o.minGPUAlloc > 0 && (s.minGPUAlloc == 0 || o.minGPUAlloc < s.minGPUAlloc) {
		s.minGPUAlloc = o.minGPUAlloc
	}
	s.noGPUNode = s.noGPUNode || o.noGPUNode
	s.maxPerf = math.Max(s.maxPerf, o.maxPerf)
	for i := range s.maxFree {
		s.maxFree[i] = max(s.maxFree[i], o.maxFree[i])
	}
}

// room reports whether some of the nodes may have room for a replica of
// c: of each resource it needs that placement always tracks, some node
// has that much free.
func (s *nodeStat) room(c *compiled) bool {
	for _, r := range c.checks {
		if r.col < len(s.maxFree) && s.maxFree[r.col] < r.want {
			return false
		}
	}
	return true
}

// summaryLocked returns the index's summary, computing it if a change
// dropped it; the caller holds x.mu (for reading is enough: concurrent
// readers compute the same summary).
func (x *Index) summaryLocked() *summary {
	if s := x.sum.Load(); s != nil {
		return s
	}
	s := &summary{all: *newNodeStat(), byLabel: make(map[string]map[string]*nodeStat, len(summaryKeys))}
	for _, k := range summaryKeys {
		s.byLabel[k] = map[string]*nodeStat{}
	}
	for _, e := range x.sorted {
		s.all.add(e)
		for _, k := range summaryKeys {
			v, ok := e.labels[k]
			if !ok {
				continue
			}
			st := s.byLabel[k][v]
			if st == nil {
				st = newNodeStat()
				s.byLabel[k][v] = st
			}
			st.add(e)
		}
	}
	x.sum.Store(s)
	return s
}

// scoreBound is at least the score (compiled.score) any node of the
// index gives a first replica of c, whatever more is used on the nodes.
// looseGPU says more GPUs may be used than the index knows (an earlier
// component of the same application took some): the GPU packing term,
// which grows with use, is then bounded by its maximum.
func (s *summary) scoreBound(c *compiled, looseGPU bool) float64 {
	if !s.all.room(c) {
		return math.Inf(-1)
	}
	b := s.all.scoreBound(c, looseGPU)
	// Each In requirement on a summary key narrows the nodes to those of
	// its values: each gives a bound, the lowest holds; none has any of
	// them, no node can take c.
	for i := range c.reqs {
		r := &c.reqs[i]
		byValue, ok := s.byLabel[r.Key]
		if !ok || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		st, some := newNodeStat(), false
		for _, v := range r.Values {
			if o := byValue[v]; o != nil {
				st.merge(o)
				some = true
			}
		}
		if !some || !st.room(c) {
			return math.Inf(-1)
		}
		b = math.Min(b, st.scoreBound(c, looseGPU))
	}
	return b
}

func (s *nodeStat) scoreBound(c *compiled, looseGPU bool) float64 {
	least := 0.0
	if s.maxAllocCPU > 0 {
		least += math.Max(0, s.maxLeftCPU-float64(c.wantCPU)/float64(s.maxAllocCPU)) / 2
	}
	if s.maxAllocMem > 0 {
		least += math.Max(0, s.maxLeftMem-float64(c.wantMem)/float64(s.maxAllocMem)) / 2
	}
	total := 40 * least
	switch {
	case c.gpus > 0:
		fill := 1.0
		if !looseGPU && s.minGPUAlloc > 0 {
			fill = math.Min(1, s.maxGPUFill+float64(c.wantGPU)/float64(s.minGPUAlloc))
		}
		total += 40 * fill
	case s.noGPUNode:
		total += 40
	}
	return total + 10 + s.maxPerf
}

// boundCluster is at least the score evaluateCluster can give c for the
// components comps, with extra counted on its nodes as placement counts
// it; -1 when c cannot host them. The summary covers every node as the index has it; a node extra
// names is bounded again with extra counted (extra may free resources).
func boundCluster(c *Cluster, comps []*compiled, extra Usage) int64 {
	if len(comps) == 0 || c.Index == nil {
		return 0
	}
	idx := c.Index
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	s := idx.summaryLocked()
	var sum int64
	gpusTaken := false
	for _, cc := range comps {
		b := s.scoreBound(cc, gpusTaken)
		for name, v := range extra {
			e := idx.entries[name]
			if e == nil || !e.present {
				continue
			}
			used := e.used.plus(v, 1)
			if !cc.hasRoom(e, used) {
				continue
			}
			nb := float64(cc.score(e, used))
			if gpusTaken && cc.gpus > 0 {
				nb += 40
			}
			b = math.Max(b, nb)
		}
		if math.IsInf(b, -1) {
			// No node has what the component asks for, or room for it:
			// the cluster cannot host the application.
			return -1
		}
		// score rounds its total; a little room covers the rounding of
		// this different sum of the same terms.
		sum += int64(math.Round(b + 1e-6))
		gpusTaken = gpusTaken || cc.gpus > 0
	}
	return sum / int64(len(comps)) * 100
}
