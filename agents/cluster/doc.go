// Package cluster is the cluster agent's layer: in its member cluster it
// places the components of every MLSysOpsApp Karmada propagated there on
// nodes (the fluidity mechanism), keeps them placed as nodes come and go,
// and reports their status. It registers its node agents, keeps their
// descriptions as MLSysOpsNode objects and their telemetry in Redis, tells
// them about the components placed on them, and reports the cluster's
// capacity to the continuum agent.
//
// Files: layer.go (the layer: construction, run loop, controllers),
// nodes.go (messages from node agents), components.go (messages to them),
// crs.go (MLSysOpsNode and MLSysOpsCluster objects), capacity.go (capacity
// reports), controller.go (the placement controller), choose.go (its
// choice of nodes), workloads.go (the Deployments and Services it writes
// and the application's status), pending.go and override.go (pods that
// cannot be scheduled, fluidity overrides), mechanism.go (the fluidity
// mechanism), fluidity/ (rendering of workloads and plans).
package cluster
