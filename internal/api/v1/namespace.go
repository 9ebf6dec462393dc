package v1

// Namespace holds the MLSysOps objects: MLSysOpsApp, MLSysOpsNode,
// MLSysOpsCluster and MLSysOpsContinuum, in the Karmada API (where the
// continuum agent and the northbound API read and write them) and, as
// Karmada propagates them, in every member cluster (where the cluster
// agents do). The workloads of an application run in a namespace of their
// own in each member cluster (internal/members).
const Namespace = "mlsysops"
