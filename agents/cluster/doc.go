// Package cluster is the cluster agent's layer: in its member cluster it
// places the components of every MLSysOpsApp Karmada propagated there on
// nodes (the fluidity mechanism), keeps them placed as nodes come and go,
// and reports their status.
package cluster
