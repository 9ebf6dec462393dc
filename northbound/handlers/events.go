package handlers

import (
	"context"
	"fmt"
	"slices"
	"sort"

	memberclusters "github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// maxEvents bounds the events shown with an application: the latest.
const maxEvents = 20

// events lists the latest events the cluster agents recorded about app's
// plans in the clusters its components run in, oldest first, so that a
// user sees why a component moved (the policy and its reason) next to
// where it runs now. A cluster that cannot be read is a warning.
func (a *API) events(ctx context.Context, app string, comps []api.ComponentPlacement, m *members) []api.Event {
	if m.infra == nil {
		return nil
	}
	var clusters []string
	for _, cp := range comps {
		if cp.Cluster != "" && !slices.Contains(clusters, cp.Cluster) {
			clusters = append(clusters, cp.Cluster)
		}
	}
	var out []api.Event
	for _, cluster := range clusters {
		evs, err := m.infra.AppEvents(ctx, cluster, app)
		if err != nil {
			m.problems = append(m.problems, fmt.Sprintf("cluster %s: events could not be read through Karmada: %v", cluster, err))
			continue
		}
		for i := range evs {
			ev := &evs[i]
			out = append(out, api.Event{
				Time: memberclusters.EventTime(ev), Cluster: cluster, Type: ev.Type, Reason: ev.Reason,
				Object: ev.InvolvedObject.Kind + "/" + ev.InvolvedObject.Name, Message: ev.Message, Count: max(ev.Count, 1),
			})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	if len(out) > maxEvents {
		out = out[len(out)-maxEvents:]
	}
	return out
}
