package placement

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// PlaceComponent chooses the nodes for a component's replicas among
// nodes: it filters the nodes that can take a replica, scores them, and
// assigns replicas one at a time to the best node given what earlier
// replicas used; ties go to the first name. It never modifies nodes, and
// explains every node (Request.Explain). Callers that place often over
// the same nodes keep an Index and use Index.Place.
func PlaceComponent(req Request, nodes []Node) (Decision, error) {
	req.Explain = true
	return NewIndexOf(nodes).Place(req)
}

// Place chooses the nodes for a component's replicas, as PlaceComponent,
// among the index's nodes.
func (x *Index) Place(req Request) (Decision, error) {
	c, err := compile(req.App, req.Component)
	if err != nil {
		return Decision{Assignment: map[string]int32{}, Rejected: map[string]string{}, Scores: map[string]int64{}}, err
	}
	if req.Replicas > 0 {
		c.replicas = req.Replicas
	}
	own := ""
	if req.Own.App != "" {
		own = compKey(req.Own.App, req.Own.Component)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.placeLocked(c, placeOpts{within: req.Within, exclude: req.Exclude, own: own, extra: req.Extra, explain: req.Explain}), nil
}

// placeOpts are a Request's options once the component is compiled.
type placeOpts struct {
	within  []string
	exclude map[string]string
	own     string
	extra   []Usage
	explain bool
}

// candidate is a node that can take a replica, with what is used on it
// as the simulated assignment goes.
type candidate struct {
	e    *entry
	used vec
	// first is the score for the first replica, score for the next.
	first, score int64
	// owned says used is this call's copy, which may be changed.
	owned bool
	// full says the node has no room for another replica.
	full bool
}

// candidates are reused from call to call: a decision over thousands of
// nodes would otherwise allocate as much as it reads.
var candidates = sync.Pool{New: func() any { return new([]candidate) }}

// placeLocked places c; the caller holds x.mu for reading.
func (x *Index) placeLocked(c *compiled, o placeOpts) Decision {
	d := Decision{Assignment: map[string]int32{}}
	adj := x.adjustmentsLocked(o)
	usedOf := func(e *entry) (vec, bool) {
		if a, ok := adj[e]; ok {
			return e.used.plus(a, 1), true
		}
		return e.used, false
	}

	universe := x.sorted
	if o.within != nil {
		universe = x.withinLocked(o.within)
	}
	buf := candidates.Get().(*[]candidate)
	cands := (*buf)[:0]
	defer func() {
		clear(cands)
		*buf = cands[:0]
		candidates.Put(buf)
	}()
	consider := func(e *entry) {
		if len(o.exclude) > 0 {
			if _, ok := o.exclude[e.name]; ok {
				return
			}
		}
		used, owned := usedOf(e)
		if f, _ := c.rejectBy(e, used); f >= 0 {
			return
		}
		score := c.score(e, used)
		cands = append(cands, candidate{e: e, used: used, first: score, score: score, owned: owned})
	}
	if driver := x.driverLocked(c); o.within == nil && driver != nil {
		// Only the nodes with one of the values the most selective
		// requirement asks for can pass the filters.
		for _, set := range driver {
			for e := range set {
				consider(e)
			}
		}
	} else {
		for _, e := range universe {
			consider(e)
		}
	}

	for r := int32(0); r < c.replicas; r++ {
		best := -1
		for i := range cands {
			cd := &cands[i]
			if cd.full {
				continue
			}
			if best < 0 || cd.score > cands[best].score || (cd.score == cands[best].score && cd.e.name < cands[best].e.name) {
				best = i
			}
		}
		if best < 0 {
			d.Unplaced = c.replicas - r
			break
		}
		cd := &cands[best]
		if d.Assignment[cd.e.name] == 0 {
			d.Nodes = append(d.Nodes, cd.e.name)
		}
		d.Assignment[cd.e.name]++
		if cd.owned {
			cd.used = cd.used.addTo(c.perPodVec, 1)
		} else {
			cd.used, cd.owned = cd.used.plus(c.perPodVec, 1), true
		}
		cd.score = c.score(cd.e, cd.used)
		// Only this node's room changed.
		cd.full = !c.hasRoom(cd.e, cd.used)
	}

	explain := o.explain || !d.Feasible()
	d.Scores = make(map[string]int64, len(d.Nodes))
	if explain {
		for i := range cands {
			d.Scores[cands[i].e.name] = cands[i].first
		}
	} else {
		for i := range cands {
			if cands[i].owned && d.Assignment[cands[i].e.name] > 0 {
				d.Scores[cands[i].e.name] = cands[i].first
			}
		}
	}
	if explain {
		d.Rejected = x.explainLocked(c, o, universe, cands, usedOf)
	}
	return d
}

// adjustmentsLocked sums, by node, the extra usage of o and, negated,
// what the component's own pods take.
func (x *Index) adjustmentsLocked(o placeOpts) map[*entry]vec {
	var adj map[*entry]vec
	put := func(e *entry, v vec, k int64) {
		if adj == nil {
			adj = map[*entry]vec{}
		}
		adj[e] = adj[e].plus(v, k)
	}
	for _, u := range o.extra {
		for name, v := range u {
			if e := x.entries[name]; e != nil && e.present {
				put(e, v, 1)
			}
		}
	}
	if o.own != "" {
		for e, cu := range x.comps[o.own] {
			if e.present {
				put(e, cu.req, -1)
			}
		}
	}
	return adj
}

// withinLocked returns the present entries named, without repeats.
func (x *Index) withinLocked(names []string) []*entry {
	out := make([]*entry, 0, len(names))
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if e := x.entries[n]; e != nil && e.present && !seen[n] {
			seen[n] = true
			out = append(out, e)
		}
	}
	return out
}

// driverLocked returns, for the In requirement of c that the fewest
// nodes satisfy, the sets of nodes with each of its values; nil when c
// has no In requirement or the smallest still holds most nodes.
func (x *Index) driverLocked(c *compiled) []map[*entry]struct{} {
	var best []map[*entry]struct{}
	bestSize := len(x.sorted)/2 + 1
	for i := range c.reqs {
		r := &c.reqs[i]
		if r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		byValue := x.byLabel[r.Key]
		size := 0
		sets := make([]map[*entry]struct{}, 0, len(r.Values))
		for _, v := range r.Values {
			if set := byValue[v]; len(set) > 0 {
				size += len(set)
				sets = append(sets, set)
			}
		}
		if size < bestSize {
			best, bestSize = sets, size
			if best == nil {
				best = []map[*entry]struct{}{}
			}
		}
	}
	return best
}

// explainLocked gives the reason of every node of the universe that is
// neither excluded nor a candidate. Reasons repeat over many nodes: each
// is built once.
func (x *Index) explainLocked(c *compiled, o placeOpts, universe []*entry, cands []candidate, usedOf func(*entry) (vec, bool)) map[string]string {
	out := make(map[string]string, len(universe)-len(cands))
	feasible := make(map[*entry]bool, len(cands))
	for i := range cands {
		feasible[cands[i].e] = true
	}
	type key struct {
		filter, detail int
		variant        string
		freq           int64
	}
	cache := map[key]string{}
	for _, e := range universe {
		if why, ok := o.exclude[e.name]; ok {
			out[e.name] = why
			continue
		}
		if feasible[e] {
			continue
		}
		used, _ := usedOf(e)
		f, detail := c.rejectBy(e, used)
		if f < 0 {
			continue // cannot happen: it would be a candidate
		}
		k := key{filter: f, detail: detail}
		switch nodeFilters[f].name {
		case "taints":
			k.variant = e.taints[detail-1]
		case "labels":
			have, ok := e.labels[c.reqs[detail-1].Key]
			if ok {
				k.variant = "=" + have
			}
		case "cpuFrequency":
			k.freq = e.maxFreqHz
		}
		why, ok := cache[k]
		if !ok {
			why = nodeFilters[f].why(c, e, detail)
			cache[k] = why
		}
		out[e.name] = why
	}
	return out
}
