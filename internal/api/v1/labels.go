package v1

import corev1 "k8s.io/api/core/v1"

// Every label, annotation and extended resource name MLSysOps reads or
// writes is declared here, so that the testbed, placement, the agents and
// the deployer agree on one spelling.

// LabelPrefix starts every label key owned by MLSysOps.
const LabelPrefix = GroupName + "/"

// Labels set on Kubernetes nodes from their MLSysOpsNode description.
const (
	// LabelContinuumLayer names the agent layer a node hosts: AgentLayerNode
	// for every managed node, AgentLayerCluster for the node that runs its
	// cluster's agent, AgentLayerContinuum on the Karmada host.
	LabelContinuumLayer = LabelPrefix + "continuumLayer"
	// LabelLayer is the node's continuum layer from its description
	// (cloud, edge_infrastructure, edge, far_edge).
	LabelLayer = LabelPrefix + "layer"
	// LabelCluster is the cluster_id the node belongs to.
	LabelCluster = LabelPrefix + "cluster"
	// LabelDatacenter is the datacenter_id the node belongs to, if any.
	LabelDatacenter = LabelPrefix + "datacenter"
	// LabelNodeType is environment.node_type (virtualized, native, bare_metal).
	LabelNodeType = LabelPrefix + "node-type"
	// LabelOS is environment.os (ubuntu, kali, zephyr).
	LabelOS = LabelPrefix + "os"
	// LabelMobile is "true" or "false".
	LabelMobile = LabelPrefix + "mobile"
	// LabelAvailability is the node's availability (transient, stable).
	LabelAvailability = LabelPrefix + "availability"
	// LabelFPGAPresent is "true" on nodes with an FPGA.
	LabelFPGAPresent = LabelPrefix + "fpga.present"
	// LabelFPGAModel is the FPGA model (e.g. zcu102), sanitized.
	LabelFPGAModel = LabelPrefix + "fpga.model"
	// LabelTPUPresent is "true" on nodes with a TPU.
	LabelTPUPresent = LabelPrefix + "tpu.present"
	// LabelSensorPrefix followed by a sensor type (camera, temperature, ...)
	// is set to "true" on nodes that offer that sensor.
	LabelSensorPrefix = LabelPrefix + "sensor."
	// LabelUserPrefix followed by a sanitized key carries a user label of the
	// description: "node-type:rpi" becomes mlsysops.eu/label.node-type=rpi and
	// a label without a colon, such as "gpu", becomes mlsysops.eu/label.gpu=true.
	LabelUserPrefix = LabelPrefix + "label."
)

// Well-known Kubernetes node labels MLSysOpsNode descriptions map to.
const (
	// LabelHostname is the node's host name.
	LabelHostname = corev1.LabelHostname
	// LabelArch is the CPU architecture (amd64, arm64).
	LabelArch = corev1.LabelArchStable
	// LabelKubeOS is the operating system family; always "linux" here.
	LabelKubeOS = corev1.LabelOSStable
)

// NVIDIA GPU feature discovery labels, which real GPU nodes carry and the
// testbed's simulated GPU nodes imitate.
const (
	// LabelGPUPresent is "true" on nodes with an NVIDIA GPU.
	LabelGPUPresent = "nvidia.com/gpu.present"
	// LabelGPUProduct is the GPU product name, e.g. NVIDIA-H100-80GB-HBM3.
	LabelGPUProduct = "nvidia.com/gpu.product"
	// LabelGPUMemory is the memory of one GPU in MiB.
	LabelGPUMemory = "nvidia.com/gpu.memory"
	// LabelGPUCount is the number of GPUs on the node.
	LabelGPUCount = "nvidia.com/gpu.count"
)

// Labels MLSysOps puts on the workloads it creates.
const (
	// LabelApp is the name of the MLSysOpsApp a workload belongs to.
	LabelApp = LabelPrefix + "app"
	// LabelComponent is the component name within the application.
	LabelComponent = LabelPrefix + "component"
	// LabelManagedBy marks objects MLSysOps owns and may delete: the
	// cluster agent's namespaces, Deployments and Services (ManagedByValue)
	// and the northbound API's policy ConfigMaps (ManagedByNorthbound).
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy on what the cluster
	// agent creates.
	ManagedByValue = "mlsysops"
	// ManagedByNorthbound is the value of LabelManagedBy on what the
	// northbound API creates.
	ManagedByNorthbound = "mlsysops-northbound"
	// LabelPolicyLayer is the agent layer (continuum, cluster, node) whose
	// policies a ConfigMap holds.
	LabelPolicyLayer = LabelPrefix + "policy-layer"
)

// Annotations on a component's Deployment in a member cluster, written by
// the cluster agent. The override ones carry fluidity plans; they live
// next to AnnotationNodes so that they survive agent restarts and go with
// the application's namespace.
const (
	// AnnotationNodes records the nodes placement chose for a component,
	// comma-separated, so a restarted agent knows its earlier decision.
	AnnotationNodes = LabelPrefix + "nodes"
	// AnnotationSpecHash is a hash of the component spec a Deployment was
	// rendered from, to detect spec changes.
	AnnotationSpecHash = LabelPrefix + "spec-hash"
	// AnnotationTemplateHash is a hash of the pod template the controller
	// last wrote into a Deployment. The API server defaults a written
	// template, so comparing field by field would see a change on every
	// pass and rewrite the Deployment each time; the hash tells a real
	// change.
	AnnotationTemplateHash = LabelPrefix + "template-hash"
	// AnnotationOverride holds the component's fluidity Override as JSON.
	AnnotationOverride = LabelPrefix + "override"
	// AnnotationOverrideDropped says why the placement controller dropped
	// the component's last override: "<plan>: <reason>".
	AnnotationOverrideDropped = LabelPrefix + "override-dropped"
)

// Annotations on an MLSysOpsApp in the Karmada API, written by the
// continuum agent. The cluster ones carry clusterPlacement plans.
const (
	// AnnotationSubmittedBy names who submitted the application through
	// the northbound API.
	AnnotationSubmittedBy = LabelPrefix + "submitted-by"
	// AnnotationClusters holds the application's ClusterPin as JSON.
	AnnotationClusters = LabelPrefix + "clusters"
	// AnnotationClustersDropped says why the placement controller dropped
	// the application's last pin: "<plan>: <reason>".
	AnnotationClustersDropped = LabelPrefix + "clusters-dropped"
)

// AnnotationPlacement, on an MLSysOpsApp's ResourceBinding in the Karmada
// API, names the member clusters the continuum agent placed the
// application on, sorted and comma-separated: the placement of record,
// which the continuum agent's binding scheduler binds. Karmada's detector
// keeps a binding's annotations when it updates the binding.
const AnnotationPlacement = LabelPrefix + "placement"

// Finalizer holds an application in a member cluster until the cluster
// agent has deleted everything it created for it.
const Finalizer = LabelPrefix + "cleanup"

// Extended resources.
const (
	// ResourceGPU is the NVIDIA device plugin's GPU resource.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
)

// Values of LabelContinuumLayer: the layer of the agent a node runs.
const (
	AgentLayerContinuum = "continuum"
	AgentLayerCluster   = "cluster"
	AgentLayerNode      = "node"
)

// EventSourceClusterAgent is the source component of the cluster agent's
// Kubernetes events (the plans of its policies: PlanAccepted with the
// policy and its reason, PlanRefused, PlanCompleted, PlanFailed), which
// the northbound shows with an application.
const EventSourceClusterAgent = "mlsysops-cluster-agent"

// MetricsPortName names the container port of a component where it serves
// its Prometheus metrics (ports[].name in the description): the node agent
// of the node a pod runs on scrapes it for the component's qos_metrics.
const MetricsPortName = "metrics"
