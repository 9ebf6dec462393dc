package api

import "net/url"

// Base paths of the versioned resources.
const (
	PathModels      = "/v1/models"
	PathDeployments = "/v1/deployments"
	PathOperations  = "/v1/operations"
	PathRuntimes    = "/v1/runtimes"
	// PathDownloads serves a deployment's artifacts to its init container;
	// a per-deployment token in the query authorises the download.
	PathDownloads = "/v1/downloads"
)

// ModelPath is the path of one model.
func ModelPath(id string) string { return PathModels + "/" + url.PathEscape(id) }

// DeploymentPath is the path of one deployment.
func DeploymentPath(id string) string { return PathDeployments + "/" + url.PathEscape(id) }

// Pagination limits of list endpoints.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Message is the {"message"} body upstream's deletions answer.
type Message struct {
	Message string `json:"message"`
}

// Page is a page of a list: Continue, when not empty, fetches the next
// one (query parameter continue).
type Page[T any] struct {
	Items    []T    `json:"items"`
	Continue string `json:"continue,omitempty"`
}
