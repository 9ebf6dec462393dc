// Package kube holds small Kubernetes helpers shared by the agents, the
// deployer and the testbed: applying CRDs and waiting for them, creating
// namespaces, and create-or-update of typed objects.
package kube
