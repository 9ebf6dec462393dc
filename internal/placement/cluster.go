package placement

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// Cluster is what cluster placement knows of one member cluster.
type Cluster struct {
	Name string
	// Ready is Karmada's view of the cluster.
	Ready bool
	// NotReady says why a cluster that is not Ready is not; "not Ready in
	// Karmada" when empty.
	NotReady string
	// Location and provider, from the cluster's datacenter description.
	Continent, Country, City, CloudProvider string
	// Index holds the cluster's nodes as the cluster agent last reported
	// them (or as read through Karmada): labels, allocatable and what is
	// requested. Its AsOf is when they were read; Assumed uses it.
	Index *Index
}

// asOf is when the cluster's nodes were read; zero when unknown.
func (c *Cluster) asOf() time.Time {
	if c.Index == nil {
		return time.Time{}
	}
	return c.Index.AsOf()
}

// AppRequest is one application to place on clusters.
type AppRequest struct {
	App *mlsysopsv1.MLSysOpsAppSpec
	// Exclude names clusters not to use, with the reason (the cluster that
	// failed, a cluster whose agent is gone).
	Exclude map[string]string
	// Explain evaluates every cluster, so that the decision's Scores and
	// Rejected give each one; otherwise clusters that cannot outrank the
	// chosen ones are skipped.
	Explain bool
}

// ClusterDecision is the outcome of placing an application.
type ClusterDecision struct {
	// Clusters chosen, best first (as many as cluster_placement.instances).
	Clusters []string
	// Rejected gives the clusters that cannot host the application with
	// the reasons, and Scores the feasible clusters' scores: every cluster
	// when the application fits nowhere or the request asked to Explain,
	// else those evaluated before the choice was certain.
	Rejected map[string][]string
	Scores   map[string]int64
	// Requests gives, for each chosen cluster, what the application takes
	// on each node in the simulated placement (pod by pod): what Assumed
	// holds until the cluster reports it.
	Requests map[string]map[string]corev1.ResourceList
}

// Feasible reports whether at least one cluster was chosen.
func (d *ClusterDecision) Feasible() bool { return len(d.Clusters) > 0 }

// Reason explains, cluster by cluster, why the application fits nowhere.
func (d *ClusterDecision) Reason() string {
	names := make([]string, 0, len(d.Rejected))
	for n := range d.Rejected {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+": "+strings.Join(d.Rejected[n], "; "))
	}
	if len(parts) == 0 {
		return "no member clusters"
	}
	return strings.Join(parts, " | ")
}

// PlaceApp chooses the clusters for an application: it keeps the clusters
// that satisfy cluster_placement (cluster ids, accelerators, node types,
// location, cloud provider) and on which every component can be placed on
// the reported nodes (components placed one after the other, so they share
// the capacity), scores them, and returns the best ones. A user's
// cluster_id list restricts the choice and its order breaks ties.
func PlaceApp(req AppRequest, clusters []Cluster) (ClusterDecision, error) {
	return placeApp(req, clusters, nil)
}

// Copies is how many clusters an application runs in: its
// cluster_placement.instances, one when unset.
func Copies(app *mlsysopsv1.MLSysOpsAppSpec) int {
	if cp := app.ClusterPlacement; cp != nil && cp.Instances > 0 {
		return int(cp.Instances)
	}
	return 1
}

// placeApp is PlaceApp with, by cluster, usage to count beyond what the
// clusters' indexes hold (the assumed ledger's); extra may be nil.
//
// Clusters are first checked for what needs no placement (exclusion,
// readiness, cluster_placement); those that pass are then evaluated best
// bound first (boundCluster: at least the score the cluster can reach),
// until the clusters chosen so far outrank every bound left. The choice
// is the one evaluating every cluster gives; only Scores and Rejected may
// then lack clusters, unless req.Explain.
func placeApp(req AppRequest, clusters []Cluster, extra map[string]Usage) (ClusterDecision, error) {
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
	// Components are compiled once for every cluster; a component that
	// cannot be compiled fails the first cluster that gets as far as
	// placing components.
	comps := make([]*compiled, len(req.App.Components))
	var compileErr error
	for i := range req.App.Components {
		if comps[i], compileErr = compile(req.App, &req.App.Components[i]); compileErr != nil {
			break
		}
	}
	n := Copies(req.App)
	type cand struct {
		c       *Cluster
		bound   int64
		score   int64
		assigns []map[string]int32
	}
	// margin is the user's order as a tie-breaker: earlier in the list is
	// better.
	margin := func(name string) int64 {
		if pos, ok := wanted[name]; ok {
			return int64(len(wanted) - pos)
		}
		return 0
	}
	open := make([]cand, 0, len(clusters))
	for i := range clusters {
		c := &clusters[i]
		if reasons := checkCluster(req, c, wanted); len(reasons) > 0 {
			d.Rejected[c.Name] = reasons
			continue
		}
		if compileErr != nil {
			return d, compileErr
		}
		bound := int64(math.MaxInt64)
		if !req.Explain {
			bound = boundCluster(c, comps, extra[c.Name]) + margin(c.Name)
		}
		open = append(open, cand{c: c, bound: bound})
	}
	// ranks reports whether a cluster of score a named an ranks before
	// one of score b named bn.
	ranks := func(a int64, an string, b int64, bn string) bool {
		if a != b {
			return a > b
		}
		return an < bn
	}
	if !req.Explain {
		sort.Slice(open, func(i, j int) bool { return ranks(open[i].bound, open[i].c.Name, open[j].bound, open[j].c.Name) })
	}
	var cands []cand // feasible, best first
	for _, o := range open {
		if len(cands) >= n {
			last := cands[n-1]
			if !ranks(o.bound, o.c.Name, last.score, last.c.Name) {
				// Neither this cluster nor any after it (their bounds
				// rank lower still) can be chosen.
				break
			}
		}
		reasons, score, assigns := evaluateCluster(req, o.c, comps, extra[o.c.Name])
		if len(reasons) > 0 {
			d.Rejected[o.c.Name] = reasons
			continue
		}
		score += margin(o.c.Name)
		d.Scores[o.c.Name] = score
		o.score, o.assigns = score, assigns
		i := sort.Search(len(cands), func(i int) bool { return ranks(score, o.c.Name, cands[i].score, cands[i].c.Name) })
		cands = slices.Insert(cands, i, o)
	}
	for i := 0; i < len(cands) && i < n; i++ {
		d.Clusters = append(d.Clusters, cands[i].c.Name)
		if d.Requests == nil {
			d.Requests = map[string]map[string]corev1.ResourceList{}
		}
		d.Requests[cands[i].c.Name] = took(comps, cands[i].assigns)
	}
	return d, nil
}

// took sums what each component's replicas request on each node.
func took(comps []*compiled, assigns []map[string]int32) map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	for i, assign := range assigns {
		for node, n := range assign {
			list := out[node]
			if list == nil {
				list = corev1.ResourceList{}
				out[node] = list
			}
			for k := int32(0); k < n; k++ {
				for res, q := range comps[i].perPod {
					add(list, res, q)
				}
			}
		}
	}
	return out
}

// checkCluster gives why c cannot host the application, as far as that
// needs no placement: exclusion, readiness and cluster_placement.
func checkCluster(req AppRequest, c *Cluster, wanted map[string]int) []string {
	if why, ok := req.Exclude[c.Name]; ok {
		return []string{why}
	}
	if !c.Ready {
		if c.NotReady != "" {
			return []string{c.NotReady}
		}
		return []string{"not Ready in Karmada"}
	}
	if len(wanted) > 0 {
		if _, ok := wanted[c.Name]; !ok {
			return []string{"not in cluster_placement.cluster_id"}
		}
	}
	cp := req.App.ClusterPlacement
	if cp == nil {
		return nil
	}
	idx := c.Index
	if idx == nil {
		idx = NewIndex()
	}
	var reasons []string
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
		if !hasAccelerator(idx, acc) {
			reasons = append(reasons, fmt.Sprintf("no node with accelerator %s", acc))
		}
	}
	if len(cp.NodeTypes) > 0 && !hasLayer(idx, cp.NodeTypes) {
		reasons = append(reasons, fmt.Sprintf("no node of type %v", cp.NodeTypes))
	}
	return reasons
}

// evaluateCluster places the components on c, which passed checkCluster:
// why they do not fit, or the cluster's score and how many replicas of
// each component go on each node.
func evaluateCluster(req AppRequest, c *Cluster, comps []*compiled, extra Usage) ([]string, int64, []map[string]int32) {
	idx := c.Index
	if idx == nil {
		idx = NewIndex()
	}
	// Place the components one after another, each counting what the
	// earlier ones took, so that together they must fit.
	var reasons []string
	taken := Usage{}
	assigns := make([]map[string]int32, len(comps))
	var score int64
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	for i, cc := range comps {
		dec := idx.placeLocked(cc, placeOpts{extra: []Usage{extra, taken}})
		if !dec.Feasible() {
			reasons = append(reasons, fmt.Sprintf("component %s: %s", req.App.Components[i].Metadata.Name, dec.Reason()))
			continue
		}
		best := int64(0)
		for _, n := range dec.Nodes {
			best = max(best, dec.Scores[n])
		}
		score += best
		assigns[i] = dec.Assignment
		for node, n := range dec.Assignment {
			taken.add(node, cc.perPodVec, int64(n))
		}
	}
	if len(reasons) > 0 {
		return reasons, 0, nil
	}
	if n := len(req.App.Components); n > 0 {
		score /= int64(n)
	}
	// Scale to leave room for the user's order as a tie-breaker.
	return nil, score * 100, assigns
}

func hasAccelerator(idx *Index, acc string) bool {
	switch acc {
	case "gpu":
		return idx.HasLabel(mlsysopsv1.LabelGPUPresent, "true")
	case "fpga":
		return idx.HasLabel(mlsysopsv1.LabelFPGAPresent, "true")
	case "tpu":
		return idx.HasLabel(mlsysopsv1.LabelTPUPresent, "true")
	}
	return false
}

func hasLayer(idx *Index, layers []mlsysopsv1.ContinuumLayer) bool {
	for _, l := range layers {
		if l == mlsysopsv1.LayerAny && idx.Len() > 0 || idx.HasLabel(mlsysopsv1.LabelLayer, string(l)) {
			return true
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
