// Package kube holds small Kubernetes helpers shared by the agents, the
// deployer and the testbed: applying CRDs and waiting for them, creating
// namespaces, create-or-update of typed objects, loading a REST config from
// a kubeconfig, asking an API server whether it is ready, and the Ready
// status of the MLSysOps description objects.
package kube
