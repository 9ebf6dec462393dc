// Package v1 holds the MLSysOps API types of group mlsysops.eu, version v1:
// the application description (MLSysOpsApp) and the system descriptions
// (MLSysOpsNode, MLSysOpsCluster, MLSysOpsContinuum, MLSysOpsDatacenter).
//
// Import it as mlsysopsv1. The field names of every spec keep the upstream
// snake_case names so that upstream description files map onto these types
// one to one; the few upstream misspellings (suported_frameworks, reduncancy)
// are spelled correctly here and accepted as aliases by the description
// loader (internal/description).
//
// Units: memory and disk sizes are integers in GB, GPU and FPGA memory are
// integers in GB, CPU and MCU frequencies are integers in Hz.
//
// Every well-known label, annotation and resource name the project uses is
// declared in labels.go.
//
// +kubebuilder:object:generate=true
// +groupName=mlsysops.eu
package v1
