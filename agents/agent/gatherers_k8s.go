//go:build !nodeagent

package agent

import crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

// controller-runtime's registry: the work queues of the continuum and
// cluster agents' controllers (depth, adds, retries, time queued and
// worked), their reconciles and API client requests. The node-only
// build links no Kubernetes client, and has no controller.
func init() { sharedGatherers = append(sharedGatherers, controllerGatherer(crmetrics.Registry)) }
