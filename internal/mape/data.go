package mape

import "sort"

// deepCopy copies maps and slices of plain data so that the engine's copy
// cannot change under it.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	case []string:
		return append([]string(nil), x...)
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

// QoSMetrics returns the application_metric_id of every qos_metrics entry
// of an application description's components, sorted and without
// duplicates. It reads the upstream flat form (components at the top) and
// the forms with a spec ({"spec": {"components": ...}}).
func QoSMetrics(desc map[string]any) []string {
	set := map[string]bool{}
	var visit func(m map[string]any)
	visit = func(m map[string]any) {
		comps, _ := m["components"].([]any)
		for _, c := range comps {
			cm, _ := c.(map[string]any)
			qos, _ := cm["qos_metrics"].([]any)
			for _, q := range qos {
				qm, _ := q.(map[string]any)
				if id, ok := qm["application_metric_id"].(string); ok && id != "" {
					set[id] = true
				}
			}
		}
		if spec, ok := m["spec"].(map[string]any); ok {
			visit(spec)
		}
	}
	if desc != nil {
		visit(desc)
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
