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
