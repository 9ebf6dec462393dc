package agent

import "github.com/prometheus/client_golang/prometheus"

// sharedGatherers are registries of the process that every agent serves
// on /metrics beside its own (see gatherers_k8s.go).
var sharedGatherers []prometheus.Gatherer
