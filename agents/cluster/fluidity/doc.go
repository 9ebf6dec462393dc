// Package fluidity is the cluster agent's placement mechanism: it turns an
// MLSysOpsApp and the nodes chosen for each component into Kubernetes
// objects (a namespace per application, a Deployment per component, a
// Service per component another component talks to or that is reachable
// from outside) and keeps the upstream command shapes (deploy, move,
// remove, change_spec) so upstream-style policies port with few edits.
//
// Pods are placed with required node affinity and resource requests,
// never by pinning spec.nodeName, so the Kubernetes scheduler still
// accounts CPU, memory and GPUs.
package fluidity
