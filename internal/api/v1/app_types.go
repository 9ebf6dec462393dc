package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=mlsysopsapps,singular=mlsysopsapp,scope=Namespaced,shortName=mlsapp,categories=mlsysops
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster_placement.cluster_id`,description="Clusters the user allows"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MLSysOpsApp is an application description: its components, their
// containers and resource needs, where they may run and the QoS targets
// MLSysOps keeps.
type MLSysOpsApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the application description in the upstream format.
	Spec MLSysOpsAppSpec `json:"spec"`
	// Status is written by the agents.
	// +optional
	Status MLSysOpsAppStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MLSysOpsAppList is a list of MLSysOpsApp.
type MLSysOpsAppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the listed objects.
	Items []MLSysOpsApp `json:"items"`
}

// MLSysOpsAppSpec is the upstream application description.
type MLSysOpsAppSpec struct {
	// Name of the application. When the description is turned into a
	// resource it becomes metadata.name.
	// +optional
	Name string `json:"name,omitempty"`
	// ClusterPlacement restricts the clusters the application may run on.
	// +optional
	ClusterPlacement *ClusterPlacement `json:"cluster_placement,omitempty"`
	// SingleNode groups components that must share one node; it overrides
	// the node_placement of the components it names.
	// +optional
	SingleNode []SingleNodePlacement `json:"single_node,omitempty"`
	// Components of the application; names are unique.
	// +kubebuilder:validation:MinItems=1
	Components []Component `json:"components"`
	// ComponentInteractions are the traffic edges between components.
	// +optional
	ComponentInteractions []ComponentInteraction `json:"component_interactions,omitempty"`
	// PermittedActions the agents may take on the application; "*" permits all.
	// +kubebuilder:validation:items:Enum=component_relocation;traffic_redirection;change_container_image;change_container_runtime_class;change_container_cpu_set;change_container_resource_requirements;acceleration;"*"
	// +listType=set
	// +optional
	PermittedActions []string `json:"permitted_actions,omitempty"`
	// GlobalSatisfaction is the application-wide QoS goal.
	// +optional
	GlobalSatisfaction *GlobalSatisfaction `json:"global_satisfaction,omitempty"`
}

// ClusterPlacement says which clusters may host an application.
type ClusterPlacement struct {
	// ClusterID lists the clusters that may host the application.
	// +listType=set
	// +optional
	ClusterID []string `json:"cluster_id,omitempty"`
	// Instances is the number of copies of the application.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Instances int32 `json:"instances,omitempty"`
	// Location restricts the clusters by place.
	// +optional
	Location *PlacementLocation `json:"location,omitempty"`
	// CloudProvider required for the cluster.
	// +kubebuilder:validation:Enum=private;aws;microsoft_azure;gcp
	// +optional
	CloudProvider string `json:"cloud_provider,omitempty"`
	// Accelerators a candidate cluster must have on at least one node.
	// +kubebuilder:validation:items:Enum=gpu;fpga;tpu
	// +optional
	Accelerators []string `json:"accelerators,omitempty"`
	// NodeTypes: a candidate cluster has at least one node of each layer.
	// +kubebuilder:validation:items:Enum=cloud;far_edge;edge_infrastructure;edge
	// +optional
	NodeTypes []ContinuumLayer `json:"node_types,omitempty"`
}

// PlacementLocation restricts placement by continent, country and city.
type PlacementLocation struct {
	// +kubebuilder:validation:items:Enum=Europe;Asia
	// +optional
	Continent []string `json:"continent,omitempty"`
	// Country codes.
	// +kubebuilder:validation:items:Enum=el;it;fr;nl;ie;pt;dk;il
	// +optional
	Country []string `json:"country,omitempty"`
	// +kubebuilder:validation:items:Enum=volos;athens;rende;milan;lille;delft;dublin;aveiro;porto;aarhus;jerusalem
	// +optional
	City []string `json:"city,omitempty"`
}

// NodePlacement constrains the nodes a component may run on.
type NodePlacement struct {
	// ContinuumLayer lists the acceptable layers; "*" means anywhere.
	// +kubebuilder:validation:items:Enum=cloud;far_edge;edge_infrastructure;edge;"*"
	// +optional
	ContinuumLayer []ContinuumLayer `json:"continuum_layer,omitempty"`
	// Scaling of the component.
	// +optional
	Scaling *Scaling `json:"scaling,omitempty"`
	// Mobile requires a mobile node.
	// +optional
	Mobile bool `json:"mobile,omitempty"`
	// Labels the node must carry, in the form of node description labels
	// ("key:value" or "key").
	// +optional
	Labels []string `json:"labels,omitempty"`
	// Node names the one node (host name) the component must run on.
	// +optional
	Node string `json:"node,omitempty"`
}

// SingleNodePlacement places a group of components on one node.
type SingleNodePlacement struct {
	// Components to co-locate.
	// +optional
	Components []string `json:"components,omitempty"`

	NodePlacement `json:",inline"`
}

// Scaling describes how many instances of a component run.
type Scaling struct {
	// +kubebuilder:validation:Enum=manual;auto
	// +optional
	ScalingMode string `json:"scaling_mode,omitempty"`
	// Instances for manual scaling.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Instances int32 `json:"instances,omitempty"`
	// ScalingCriteria for auto scaling.
	// +kubebuilder:validation:Enum=min_cpu_utilization;max_cpu_utilization;min_memory_percent;max_memory_percent;min_requests_per_sec;max_request_per_sec;min_number_of_instances;max_number_of_instances
	// +optional
	ScalingCriteria string `json:"scaling_criteria,omitempty"`
}

// Component is one deployable part of an application.
type Component struct {
	// Metadata names the component.
	Metadata ComponentMetadata `json:"metadata"`
	// NodePlacement constrains the component's nodes.
	// +optional
	NodePlacement *NodePlacement `json:"node_placement,omitempty"`
	// DependsOn lists components that must run before this one starts.
	// +listType=set
	// +optional
	DependsOn []string `json:"depends_on,omitempty"`
	// RuntimeConfiguration enables node-level runtime knobs.
	// +optional
	RuntimeConfiguration *RuntimeConfiguration `json:"runtime_configuration,omitempty"`
	// Sensors the component needs.
	// +optional
	Sensors []AppSensor `json:"sensors,omitempty"`
	// QoSMetrics are the component's application-level targets.
	// +optional
	QoSMetrics []QoSMetric `json:"qos_metrics,omitempty"`
	// Storage needs of the component.
	// +optional
	Storage *Storage `json:"storage,omitempty"`
	// DataSensitivity marks components handling sensitive data.
	// +optional
	DataSensitivity bool `json:"data_sensitivity,omitempty"`
	// DataCriticality is the trust level the component needs.
	// +kubebuilder:validation:Enum=low;medium;high
	// +optional
	DataCriticality string `json:"data_criticality,omitempty"`
	// ExternalComponent: MLSysOps deploys and removes it but does not manage it.
	// +optional
	ExternalComponent bool `json:"external_component,omitempty"`
	// ExternalAccess: the component is reachable from outside its cluster.
	// +optional
	ExternalAccess bool `json:"external_access,omitempty"`
	// HostNetwork runs the component in the host's network namespace.
	// +optional
	HostNetwork bool `json:"host_network,omitempty"`
	// RuntimeClassName selects the container runtime class; "default" means
	// the cluster's default.
	// +kubebuilder:validation:Enum=nvidia;default;kata-fc;kata-dragon;urunc;crun;lunatic;nvidia-experimental;spin;wasmedge;slight
	// +optional
	RuntimeClassName string `json:"runtime_class_name,omitempty"`
	// RestartPolicy of the component's containers.
	// +kubebuilder:validation:Enum=Always;OnFailure;Never
	// +optional
	RestartPolicy string `json:"restart_policy,omitempty"`
	// OS the node must run.
	// +kubebuilder:validation:Enum=ubuntu;kali;zephyr
	// +optional
	OS string `json:"os,omitempty"`
	// NodeType the node must be.
	// +kubebuilder:validation:Enum=virtualized;native;bare_metal
	// +optional
	NodeType string `json:"node_type,omitempty"`
	// ContainerRuntime the node must offer.
	// +kubebuilder:validation:Enum=containerd;docker;emb_serve
	// +optional
	ContainerRuntime string `json:"container_runtime,omitempty"`
	// Containers of the component.
	// +kubebuilder:validation:MinItems=1
	Containers []Container `json:"containers"`
	// InitContainers run one after another, each to completion, before
	// the containers start (e.g. to fetch a model's files). They take the
	// component's node; their platform_requirements count as Kubernetes
	// counts an init container's (the largest, not the sum).
	// +optional
	InitContainers []Container `json:"init_containers,omitempty"`
	// Volumes the component's containers can mount; they live as long as
	// a replica (scratch space shared by init containers and containers).
	// +listType=map
	// +listMapKey=name
	// +optional
	Volumes []Volume `json:"volumes,omitempty"`
}

// Volume is a scratch volume of a component's replica.
type Volume struct {
	// Name is unique within the component; volume_mounts refer to it.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// EmptyDir is an empty folder on the node, removed with the replica.
	// +optional
	EmptyDir *EmptyDirVolume `json:"empty_dir,omitempty"`
}

// EmptyDirVolume is an empty folder on the node.
type EmptyDirVolume struct {
	// SizeLimit bounds what the folder may hold ("1Gi").
	// +optional
	SizeLimit *resource.Quantity `json:"size_limit,omitempty"`
	// Memory keeps the folder in RAM (tmpfs); it counts against the
	// container's memory.
	// +optional
	Memory bool `json:"memory,omitempty"`
}

// VolumeMount mounts a volume of the component into a container.
type VolumeMount struct {
	// Name of the component's volume.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// MountPath is the absolute path in the container.
	// +kubebuilder:validation:MinLength=1
	MountPath string `json:"mount_path"`
	// +optional
	ReadOnly bool `json:"read_only,omitempty"`
}

// Probe says when a container is ready to serve: until it succeeds the
// replica gets no traffic, and a rolling update keeps the old replica.
type Probe struct {
	// HTTPGet succeeds when GET http://<pod>:<port><path> answers 2xx or 3xx.
	// +optional
	HTTPGet *HTTPGetProbe `json:"http_get,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	InitialDelaySeconds int32 `json:"initial_delay_seconds,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +optional
	PeriodSeconds int32 `json:"period_seconds,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +optional
	TimeoutSeconds int32 `json:"timeout_seconds,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +optional
	FailureThreshold int32 `json:"failure_threshold,omitempty"`
}

// HTTPGetProbe is an HTTP GET on the container.
type HTTPGetProbe struct {
	// Path of the request, starting with /.
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// Port of the container.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// ComponentMetadata identifies a component.
type ComponentMetadata struct {
	// Name is unique within the application and names the component's
	// Kubernetes workload and Service.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// UID is an identifier assigned by MLSysOps.
	// +optional
	UID string `json:"uid,omitempty"`
}

// RuntimeConfiguration points at the component's runtime knobs.
type RuntimeConfiguration struct {
	// ConfigSpecificationFile describes the available knobs (JSON).
	// +optional
	ConfigSpecificationFile string `json:"config_specification_file,omitempty"`
	// ConfigFilePath is where the container expects that file.
	// +optional
	ConfigFilePath string `json:"config_file_path,omitempty"`
}

// AppSensor is a sensor a component needs.
type AppSensor struct {
	// +optional
	Camera *AppCameraSensor `json:"camera,omitempty"`
	// +optional
	Temperature *TemperatureSensor `json:"temperature,omitempty"`
	// +optional
	Accelerometer *AccelerometerSensor `json:"accelerometer,omitempty"`
	// +optional
	Barometer *BarometerSensor `json:"barometer,omitempty"`
	// +optional
	AirQuality *AirQualitySensor `json:"air_quality,omitempty"`
	// EndpointVariable is the environment variable through which the
	// component reads the sensor's endpoint.
	// +optional
	EndpointVariable string `json:"endpoint_variable,omitempty"`
	// +kubebuilder:validation:Enum=MQTT;RTSP
	// +optional
	Protocol string `json:"protocol,omitempty"`
	// Instances of the sensor needed.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Instances int32 `json:"instances,omitempty"`
}

// AppCameraSensor is a camera requirement.
type AppCameraSensor struct {
	// +kubebuilder:validation:Enum=d455;imx477;picamera-v2
	// +optional
	Model string `json:"model,omitempty"`
	// +kubebuilder:validation:Enum=rgb;nir;thermal;monocular
	// +optional
	CameraType string `json:"camera_type,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinimumFramerate int32 `json:"minimum_framerate,omitempty"`
	// +kubebuilder:validation:Enum="1024x768";"4056x3040"
	// +optional
	Resolution string `json:"resolution,omitempty"`
}

// QoSMetric is an application-level target.
type QoSMetric struct {
	// ApplicationMetricID names the metric the application exports.
	// +kubebuilder:validation:MinLength=1
	ApplicationMetricID string `json:"application_metric_id"`
	// Target value.
	// +optional
	Target *float64 `json:"target,omitempty"`
	// Relation between the measured value and Target.
	// +kubebuilder:validation:Enum=lower_or_equal;greater_or_equal;equal;lower_than;greater_than
	// +optional
	Relation Relation `json:"relation,omitempty"`
	// SystemMetricsHints are system metrics that affect this metric.
	// +kubebuilder:validation:items:Enum=cpu_frequency
	// +optional
	SystemMetricsHints []string `json:"system_metrics_hints,omitempty"`
}

// Storage lists the buckets of the continuum storage service a component uses.
type Storage struct {
	// +optional
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket is a storage bucket.
type Bucket struct {
	// BucketID is unique.
	// +kubebuilder:validation:MinLength=1
	BucketID string `json:"bucket_id"`
	// PolicyUpdateToken lets MLSysOps change the bucket's policy.
	// +optional
	PolicyUpdateToken string `json:"policy_update_token,omitempty"`
	// +optional
	LocationRestrictions *LocationRestrictions `json:"location_restrictions,omitempty"`
	// Redundancy level (upstream spells the key "reduncancy"; the loader
	// accepts both).
	// +kubebuilder:validation:Enum=high;one;none
	// +optional
	Redundancy string `json:"redundancy,omitempty"`
	// +optional
	MaxLatency *float64 `json:"max_latency,omitempty"`
	// +optional
	MinDownloadSpeed *float64 `json:"min_download_speed,omitempty"`
	// +kubebuilder:validation:Enum=on;off
	// +optional
	ServerSideEncryption string `json:"server_side_encryption,omitempty"`
}

// LocationRestrictions exclude storage locations.
type LocationRestrictions struct {
	// GDPR allows GDPR-compliant locations only.
	// +optional
	GDPR bool `json:"gdpr,omitempty"`
}

// Container is one container of a component.
type Container struct {
	// Image reference.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// Command replaces the image's entrypoint.
	// +optional
	Command []string `json:"command,omitempty"`
	// Args replace the image's default arguments.
	// +optional
	Args []string `json:"args,omitempty"`
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	// +optional
	ImagePullPolicy string `json:"image_pull_policy,omitempty"`
	// AccelerationAPI lists accelerated calls the container makes.
	// +optional
	AccelerationAPI []AppAccelerationAPI `json:"acceleration_api,omitempty"`
	// PlatformRequirements are the container's resource needs.
	// +optional
	PlatformRequirements *PlatformRequirements `json:"platform_requirements,omitempty"`
	// Ports the container exposes.
	// +optional
	Ports []ContainerPort `json:"ports,omitempty"`
	// Env variables.
	// +optional
	Env []EnvVar `json:"env,omitempty"`
	// VolumeMounts mount the component's volumes.
	// +optional
	VolumeMounts []VolumeMount `json:"volume_mounts,omitempty"`
	// ReadinessProbe says when the container is ready; without one it is
	// ready once it runs.
	// +optional
	ReadinessProbe *Probe `json:"readiness_probe,omitempty"`
}

// AppAccelerationAPI is an accelerated call a container needs.
type AppAccelerationAPI struct {
	// +kubebuilder:validation:Enum=calc_optical_flow;image_inference
	CallName string `json:"call_name"`
	// RequiredFramework; "*" means any.
	// +kubebuilder:validation:Enum=pytorch;tensorflow;opencl;"*"
	// +optional
	RequiredFramework string `json:"required_framework,omitempty"`
}

// PlatformRequirements are the resources a container needs.
type PlatformRequirements struct {
	// +optional
	CPU *CPURequirements `json:"cpu,omitempty"`
	// +optional
	Memory *MemoryRequirements `json:"memory,omitempty"`
	// +optional
	MCU *MCURequirements `json:"mcu,omitempty"`
	// Disk space in GB.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Disk int64 `json:"disk,omitempty"`
	// +optional
	GPU *GPURequirements `json:"gpu,omitempty"`
	// +optional
	FPGA *FPGARequirements `json:"fpga,omitempty"`
}

// CPURequirements are CPU needs.
type CPURequirements struct {
	// Requests in Kubernetes CPU units ("500m", "2").
	// +optional
	Requests *resource.Quantity `json:"requests,omitempty"`
	// Limits in Kubernetes CPU units.
	// +optional
	Limits *resource.Quantity `json:"limits,omitempty"`
	// Architecture lists the acceptable CPU architectures.
	// +kubebuilder:validation:items:Enum=arm64;amd64
	// +optional
	Architecture []string `json:"architecture,omitempty"`
	// Frequency is the minimum CPU frequency in Hz.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Frequency int64 `json:"frequency,omitempty"`
	// +optional
	PerformanceIndicator *float64 `json:"performance_indicator,omitempty"`
}

// MemoryRequirements are memory needs.
type MemoryRequirements struct {
	// Requests in Kubernetes memory units ("512Mi", "4Gi").
	// +optional
	Requests *resource.Quantity `json:"requests,omitempty"`
	// Limits in Kubernetes memory units.
	// +optional
	Limits *resource.Quantity `json:"limits,omitempty"`
}

// MCURequirements are microcontroller needs.
type MCURequirements struct {
	// +optional
	Requests string `json:"requests,omitempty"`
	// +optional
	Limits string `json:"limits,omitempty"`
	// +kubebuilder:validation:items:Enum=arm-m4;arm-M4
	// +optional
	Architecture []string `json:"architecture,omitempty"`
	// Flash memory size.
	// +optional
	Flash string `json:"flash,omitempty"`
	// Frequency is the minimum MCU frequency in Hz.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Frequency int64 `json:"frequency,omitempty"`
	// +optional
	PerformanceIndicator *float64 `json:"performance_indicator,omitempty"`
}

// GPURequirements are GPU needs.
type GPURequirements struct {
	// Requests is the number of GPUs.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Requests int32 `json:"requests,omitempty"`
	// Limits is the number of GPUs; when both are set they must be equal,
	// as Kubernetes does not overcommit GPUs.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Limits int32 `json:"limits,omitempty"`
	// Model is the GPU product name, as in the node description and the
	// nvidia.com/gpu.product label (e.g. NVIDIA-H100-80GB-HBM3, k80).
	// +optional
	Model string `json:"model,omitempty"`
	// Memory is the minimum memory of one GPU in GB.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Memory int64 `json:"memory,omitempty"`
	// UtilizationRequest is the expected utilization in percent.
	// +optional
	UtilizationRequest string `json:"utilization_request,omitempty"`
	// +optional
	PerformanceIndicator *float64 `json:"performance_indicator,omitempty"`
}

// FPGARequirements are FPGA needs.
type FPGARequirements struct {
	// Model of the FPGA (e.g. zcu102).
	// +optional
	Model string `json:"model,omitempty"`
	// Memory in GB.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Memory int64 `json:"memory,omitempty"`
	// UtilizationRequest is the expected utilization in percent.
	// +optional
	UtilizationRequest string `json:"utilization_request,omitempty"`
	// +optional
	PerformanceIndicator *float64 `json:"performance_indicator,omitempty"`
}

// ContainerPort is a port a container exposes.
type ContainerPort struct {
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ContainerPort int32 `json:"container_port"`
	// +optional
	HostIP string `json:"host_ip,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	HostPort int32 `json:"host_port,omitempty"`
	// Name is unique within the component; Services refer to it.
	// +optional
	Name string `json:"name,omitempty"`
	// +kubebuilder:validation:Enum=UDP;TCP;SCTP
	// +kubebuilder:default=TCP
	// +optional
	Protocol string `json:"protocol,omitempty"`
}

// EnvVar is an environment variable.
type EnvVar struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Value string `json:"value,omitempty"`
	// +optional
	ValueFrom *EnvVarSource `json:"value_from,omitempty"`
}

// EnvVarSource takes a variable's value from the pod.
type EnvVarSource struct {
	// +optional
	FieldRef *FieldRef `json:"field_ref,omitempty"`
}

// FieldRef selects a field of the pod, e.g. status.hostIP.
type FieldRef struct {
	// +kubebuilder:validation:MinLength=1
	FieldPath string `json:"field_path"`
}

// ComponentInteraction is a traffic edge between two components.
type ComponentInteraction struct {
	// ComponentName1 is the source component.
	// +kubebuilder:validation:MinLength=1
	ComponentName1 string `json:"component_name1"`
	// +kubebuilder:validation:Enum=ingress;egress
	// +optional
	Type string `json:"type,omitempty"`
	// ComponentName2 is the destination component.
	// +kubebuilder:validation:MinLength=1
	ComponentName2 string `json:"component_name2"`
	// +kubebuilder:validation:Enum=low;medium;high
	// +optional
	InteractionCriticality string `json:"interaction_criticality,omitempty"`
	// +optional
	InteractionMetrics []InteractionMetric `json:"interaction_metrics,omitempty"`
}

// InteractionMetric is a system-level target on an interaction.
type InteractionMetric struct {
	// +kubebuilder:validation:Enum=latency;bandwidth;end_to_end_invocation_delay
	// +optional
	SystemMetricID string `json:"system_metric_id,omitempty"`
	// +optional
	Target *float64 `json:"target,omitempty"`
	// +kubebuilder:validation:Enum=milliseconds;Mbps;seconds
	// +optional
	MeasurementUnit string `json:"measurement_unit,omitempty"`
	// +kubebuilder:validation:Enum=lower_or_equal;greater_or_equal;equal;lower_than;greater_than
	// +optional
	Relation Relation `json:"relation,omitempty"`
}

// GlobalSatisfaction is the application-wide QoS goal.
type GlobalSatisfaction struct {
	// Threshold is the minimum satisfaction, in (0, 1].
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:ExclusiveMinimum=true
	// +kubebuilder:validation:Maximum=1
	// +optional
	Threshold *float64 `json:"threshold,omitempty"`
	// +kubebuilder:validation:Enum=greater_or_equal;equal;greater_than
	// +optional
	Relation Relation `json:"relation,omitempty"`
	// AchievementWeights weigh the components' QoS metrics.
	// +optional
	AchievementWeights []AchievementWeight `json:"achievement_weights,omitempty"`
}

// AchievementWeight weighs one QoS metric.
type AchievementWeight struct {
	// MetricID is an application_metric_id of a component.
	// +kubebuilder:validation:MinLength=1
	MetricID string `json:"metric_id"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	Weight float64 `json:"weight"`
}

// AppPhase is the coarse state of an application. It moves Queued →
// Scheduling → Deploying → Running, and to Degraded, Unschedulable or
// Failed with a reason in the status message.
// +kubebuilder:validation:Enum=Queued;Scheduling;Deploying;Running;Degraded;Unschedulable;Failed;Removing
type AppPhase string

// Application phases.
const (
	// AppQueued: accepted, waiting for the continuum agent.
	AppQueued AppPhase = "Queued"
	// AppScheduling: clusters or nodes are being chosen.
	AppScheduling AppPhase = "Scheduling"
	// AppDeploying: workloads are created, not all ready.
	AppDeploying AppPhase = "Deploying"
	// AppRunning: every component has its ready replicas.
	AppRunning AppPhase = "Running"
	// AppDegraded: some component lost replicas or misses its QoS.
	AppDegraded AppPhase = "Degraded"
	// AppUnschedulable: no cluster or node can host the application now;
	// the message gives the reason per cluster. It is retried as capacity
	// changes.
	AppUnschedulable AppPhase = "Unschedulable"
	// AppFailed: the application cannot run (invalid, or its workloads fail).
	AppFailed AppPhase = "Failed"
	// AppRemoving: the application is being deleted.
	AppRemoving AppPhase = "Removing"
)

// AppRemoved is the phase clients report once an application is gone
// (`mls watch` prints it). No status ever holds it: when removal
// completes the resource is deleted and the shared state forgets the
// application, so it is not in AppPhases.
const AppRemoved AppPhase = "Removed"

// AppPhases are the phases a status can hold, in lifecycle order. The
// shared state, the agents, the northbound API and the CLI use these names
// and no others.
var AppPhases = []AppPhase{
	AppQueued, AppScheduling, AppDeploying, AppRunning, AppDegraded, AppUnschedulable, AppFailed, AppRemoving,
}

// Valid reports whether p is one of AppPhases.
func (p AppPhase) Valid() bool {
	for _, q := range AppPhases {
		if p == q {
			return true
		}
	}
	return false
}

// MLSysOpsAppStatus is the observed state of an application.
type MLSysOpsAppStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the application's state.
	// +optional
	Phase AppPhase `json:"phase,omitempty"`
	// Message explains the phase to a person.
	// +optional
	Message string `json:"message,omitempty"`
	// Components is the placement of each component, one entry per
	// component and cluster (an application on several clusters has the
	// same component in each).
	// +listType=map
	// +listMapKey=name
	// +listMapKey=cluster
	// +optional
	Components []ComponentStatus `json:"components,omitempty"`
	// Conditions: Placed, Ready, Valid.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ComponentStatus is where a component runs.
type ComponentStatus struct {
	// Name of the component.
	Name string `json:"name"`
	// Cluster the component is placed on (empty while it is on none).
	// +kubebuilder:default=""
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// Nodes running the component's replicas.
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// Replicas wanted; zero (omitted) only when a plan stopped the
	// component, which then counts as ready.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas running and ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Message explains a problem with the component.
	// +optional
	Message string `json:"message,omitempty"`
}
