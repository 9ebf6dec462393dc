// Package resources converts MLSysOps descriptions into Kubernetes terms:
// a node description into node labels and capacity (used by the testbed to
// create simulated nodes and by placement to read real ones), and a
// component's platform requirements into container resource requirements,
// required node affinity and a runtime class.
//
// Label and resource names come from internal/api/v1 (labels.go).
package resources
