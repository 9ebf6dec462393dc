package api

import "net/url"

// Base paths of the versioned resources.
const (
	PathApplications   = "/v1/applications"
	PathMLDeployments  = "/v1/ml-deployments"
	PathInfrastructure = "/v1/infrastructure"
	PathClusters       = "/v1/infrastructure/clusters"
	PathNodes          = "/v1/infrastructure/nodes"
	PathAgents         = "/v1/agents"
	PathAgentsMode     = "/v1/agents/mode"
	PathPolicies       = "/v1/policies"
	PathHealthz        = "/healthz"
	PathReadyz         = "/readyz"
	PathMetrics        = "/metrics"
	PathOpenAPI        = "/openapi.json"
	PathDocs           = "/docs"
)

// ItemPath is the path of one item of a collection: base + "/" + escaped id.
func ItemPath(base, id string) string { return base + "/" + url.PathEscape(id) }

// Phases an application or ML deployment can be in: those of the
// MLSysOpsApp resource and those the shared state records between
// submissions.
var Phases = []string{
	"Queued", "Scheduling", "Scheduled", "Deploying", "Running", "Degraded",
	"Unschedulable", "Failed", "Removing", "Removed",
}

// ValidPhase reports whether p is one of Phases.
func ValidPhase(p string) bool {
	for _, q := range Phases {
		if p == q {
			return true
		}
	}
	return false
}

// Layers of agents and policies.
var Layers = []string{"continuum", "cluster", "node"}

// ValidLayer reports whether l is one of Layers.
func ValidLayer(l string) bool {
	switch l {
	case "continuum", "cluster", "node":
		return true
	}
	return false
}

// Pagination limits of list endpoints.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)
