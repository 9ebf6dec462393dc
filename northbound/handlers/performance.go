package handlers

import (
	"context"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// performance answers with the QoS metrics of an item against their
// targets.
func (c collection) performance(a *API, w http.ResponseWriter, r *http.Request) error {
	v, err := c.load(a, r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		return err
	}
	p, err := a.performanceOf(r.Context(), v)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// performanceOf reads the latest telemetry of the nodes each component
// runs on and compares every QoS metric with its target.
//
// A metric is found in a node's sample under its application_metric_id,
// or as a series of it (id{labels}) whose app and component labels, when
// present, name this application and component. With several replicas the
// most recent reading wins.
func (a *API) performanceOf(ctx context.Context, v *view) (api.Performance, error) {
	out := api.Performance{Metrics: []api.MetricValue{}}
	if v.status != nil {
		out.ID = v.status.ID
	} else {
		out.ID = v.resource.Name
	}
	if v.spec == nil {
		return out, nil
	}
	nodes := map[string][]string{}
	for _, cp := range a.components(ctx, v, a.members()) {
		nodes[cp.Name] = append(nodes[cp.Name], cp.Nodes...)
	}
	var all []string
	for _, ns := range nodes {
		all = append(all, ns...)
	}
	samples := map[string]state.Sample{}
	if len(all) > 0 {
		var err error
		if samples, err = a.cfg.Store.Telemetry().GetMany(ctx, dedupe(all)...); err != nil {
			return api.Performance{}, backend("the shared state (Redis)", err)
		}
	}
	values := map[string]*api.MetricValue{}
	for _, comp := range v.spec.Spec.Components {
		for _, q := range comp.QoSMetrics {
			mv := api.MetricValue{
				Component: comp.Metadata.Name, Metric: q.ApplicationMetricID, Target: q.Target, Relation: string(q.Relation),
			}
			switch {
			case len(nodes[comp.Metadata.Name]) == 0:
				mv.Reason = "the component is not placed yet"
			default:
				var best time.Time
				for _, n := range nodes[comp.Metadata.Name] {
					s, ok := samples[n]
					if !ok {
						continue
					}
					if val, ok := lookupMetric(s.Metrics, q.ApplicationMetricID, out.ID, comp.Metadata.Name); ok && (mv.Value == nil || s.Time.After(best)) {
						val, t := val, s.Time
						mv.Value, mv.Node, mv.SampledAt, best = &val, n, &t, s.Time
					}
				}
				if mv.Value == nil {
					mv.Reason = "no node running the component reports this metric"
				}
			}
			if mv.Value != nil && mv.Target != nil {
				ok := compare(*mv.Value, string(q.Relation), *mv.Target)
				if q.Relation != "" {
					mv.Satisfied = &ok
				}
			}
			out.Metrics = append(out.Metrics, mv)
		}
	}
	for i := range out.Metrics {
		values[out.Metrics[i].Metric] = &out.Metrics[i]
	}
	if gs := v.spec.Spec.GlobalSatisfaction; gs != nil {
		out.GlobalSatisfaction = satisfaction(gs, out.Metrics, values)
	}
	return out, nil
}

func satisfaction(gs *mlsysopsv1.GlobalSatisfaction, metrics []api.MetricValue, byID map[string]*api.MetricValue) *api.Satisfaction {
	s := &api.Satisfaction{Threshold: gs.Threshold, Relation: string(gs.Relation)}
	type weighted struct {
		m *api.MetricValue
		w float64
	}
	var ws []weighted
	if len(gs.AchievementWeights) > 0 {
		for _, aw := range gs.AchievementWeights {
			ws = append(ws, weighted{byID[aw.MetricID], aw.Weight})
		}
	} else {
		for i := range metrics {
			ws = append(ws, weighted{&metrics[i], 1})
		}
	}
	var sum, got float64
	for _, w := range ws {
		if w.m == nil || w.m.Satisfied == nil {
			return s
		}
		sum += w.w
		if *w.m.Satisfied {
			got += w.w
		}
	}
	if sum == 0 {
		return s
	}
	val := got / sum
	s.Value = &val
	if gs.Threshold != nil && gs.Relation != "" {
		ok := compare(val, string(gs.Relation), *gs.Threshold)
		s.Satisfied = &ok
	}
	return s
}

// compare applies a QoS relation.
func compare(v float64, relation string, target float64) bool {
	switch relation {
	case "lower_or_equal":
		return v <= target
	case "greater_or_equal":
		return v >= target
	case "lower_than":
		return v < target
	case "greater_than":
		return v > target
	case "equal":
		return math.Abs(v-target) <= 1e-9*math.Max(1, math.Abs(target))
	}
	return false
}

// lookupMetric finds metric in a sample: the plain name, or a series of it
// whose app and component labels (when present) match.
func lookupMetric(m map[string]float64, metric, app, component string) (float64, bool) {
	if v, ok := m[metric]; ok {
		return v, true
	}
	keys := make([]string, 0)
	for k := range m {
		if strings.HasPrefix(k, metric+"{") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		labels := k[len(metric)+1:]
		if labelMismatch(labels, "app", app) || labelMismatch(labels, "component", component) {
			continue
		}
		return m[k], true
	}
	return 0, false
}

// labelMismatch reports whether a series' label set names another value
// for key.
func labelMismatch(labels, key, want string) bool {
	for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if k == key || strings.HasSuffix(k, "/"+key) || strings.HasSuffix(k, "_"+key) {
			return strings.Trim(strings.TrimSpace(v), `"`) != want
		}
	}
	return false
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	out := ss[:0:0]
	for _, s := range ss {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
