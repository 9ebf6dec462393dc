package agent

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// sharedGatherers are registries of the process that every agent serves
// on /metrics beside its own (see gatherers_k8s.go).
var sharedGatherers []prometheus.Gatherer

// controllerFamilies are the metric families taken from controller-runtime's
// registry: its controllers' work queues and reconciles, leader election,
// and API client requests. Others registered there (a dependency registers
// the Go runtime's collector) would repeat the agent's own, and one family
// collected twice fails the whole /metrics answer.
var controllerFamilies = []string{"workqueue_", "controller_runtime_", "rest_client_", "leader_election_", "certwatcher_"}

// controllerGatherer gathers g's controllerFamilies only.
func controllerGatherer(g prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			for _, p := range controllerFamilies {
				if strings.HasPrefix(mf.GetName(), p) {
					out = append(out, mf)
					break
				}
			}
		}
		return out, err
	})
}
