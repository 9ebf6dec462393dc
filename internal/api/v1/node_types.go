package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=mlsysopsnodes,singular=mlsysopsnode,scope=Namespaced,shortName=mlsnode,categories=mlsysops
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster_id`
// +kubebuilder:printcolumn:name="Layer",type=string,JSONPath=`.spec.continuum_layer`
// +kubebuilder:printcolumn:name="Arch",type=string,JSONPath=`.spec.hardware.cpu.architecture`
// +kubebuilder:printcolumn:name="GPU",type=string,JSONPath=`.spec.hardware.gpu.model`
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.spec.hardware.gpu.instances`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MLSysOpsNode describes one node of the continuum: its hardware, software
// environment, sensors, accelerators, network and power. metadata.name is
// the node's host name.
type MLSysOpsNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the node description in the upstream format.
	Spec MLSysOpsNodeSpec `json:"spec"`
	// Status is written by the node's agent.
	// +optional
	Status MLSysOpsNodeStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MLSysOpsNodeList is a list of MLSysOpsNode.
type MLSysOpsNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the listed objects.
	Items []MLSysOpsNode `json:"items"`
}

// MLSysOpsNodeSpec is the upstream node description.
type MLSysOpsNodeSpec struct {
	// Name is the node's host name.
	// +optional
	Name string `json:"name,omitempty"`
	// Labels are free-form node labels, "key:value" or "key".
	// +optional
	Labels []string `json:"labels,omitempty"`
	// ContinuumLayer of the node.
	// +kubebuilder:validation:Enum=cloud;edge_infrastructure;edge;far_edge
	ContinuumLayer ContinuumLayer `json:"continuum_layer"`
	// ClusterID is the cluster the node belongs to (its Karmada member
	// cluster name).
	// +optional
	ClusterID string `json:"cluster_id,omitempty"`
	// DatacenterID is the datacenter the node belongs to, if any.
	// +optional
	DatacenterID string `json:"datacenter_id,omitempty"`
	// Availability of the node (e.g. transient for battery-powered nodes).
	// +kubebuilder:validation:Enum=transient;stable
	// +optional
	Availability string `json:"availability,omitempty"`
	// Mobile nodes move; their location is telemetry.
	// +optional
	Mobile bool `json:"mobile,omitempty"`
	// Location is [longitude, latitude].
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=2
	// +optional
	Location []float64 `json:"location,omitempty"`
	// Sensors the node offers as services.
	// +optional
	Sensors []NodeSensor `json:"sensors,omitempty"`
	// PermittedActions the agents may take on the node; "*" permits all.
	// +kubebuilder:validation:items:Enum=set_power_cap;traffic_redirection;acceleration;cpu_frequency;gpu_frequency;change_container_cpu_set;change_container_image;"*"
	// +listType=set
	// +optional
	PermittedActions []string `json:"permitted_actions,omitempty"`
	// DistributedStorageService membership.
	// +optional
	DistributedStorageService *DistributedStorageService `json:"distributed_storage_service,omitempty"`
	// Environment is the node's software environment.
	Environment NodeEnvironment `json:"environment"`
	// AccelerationAPI lists the accelerated calls the node serves.
	// +optional
	AccelerationAPI []NodeAccelerationAPI `json:"acceleration_api,omitempty"`
	// Hardware of the node.
	// +optional
	Hardware *NodeHardware `json:"hardware,omitempty"`
	// NetworkResources of the node.
	// +optional
	NetworkResources *NetworkResources `json:"network_resources,omitempty"`
	// Power supply and targets.
	// +optional
	Power *Power `json:"power,omitempty"`
}

// NodeSensor is a sensor a node offers.
type NodeSensor struct {
	// +optional
	Camera *NodeCameraSensor `json:"camera,omitempty"`
	// +optional
	Temperature *TemperatureSensor `json:"temperature,omitempty"`
	// +optional
	Accelerometer *AccelerometerSensor `json:"accelerometer,omitempty"`
	// +optional
	Humidity *EnvironmentSensor `json:"humidity,omitempty"`
	// +optional
	Sound *EnvironmentSensor `json:"sound,omitempty"`
	// +optional
	CO2 *EnvironmentSensor `json:"co2,omitempty"`
	// +optional
	Barometer *BarometerSensor `json:"barometer,omitempty"`
	// +optional
	AirQuality *AirQualitySensor `json:"air_quality,omitempty"`
	// Instances of the sensor.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Instances int32 `json:"instances,omitempty"`
	// +kubebuilder:validation:Enum=MQTT;RTSP
	// +optional
	Protocol string `json:"protocol,omitempty"`
	// Endpoint serving the sensor's data.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
}

// NodeCameraSensor is a camera on a node.
type NodeCameraSensor struct {
	// Instances is the number of identical cameras.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Instances int32 `json:"instances,omitempty"`
	// +kubebuilder:validation:Enum=imx415;imx219;d455;imx477;picamera-v2
	// +optional
	Model string `json:"model,omitempty"`
	// CameraType (e.g. rgb, nir, thermal).
	// +optional
	CameraType string `json:"camera_type,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	Framerate int32 `json:"framerate,omitempty"`
	// +kubebuilder:validation:items:Enum="1024x768";"4056x3040"
	// +optional
	SupportedResolutions []string `json:"supported_resolutions,omitempty"`
}

// EnvironmentSensor is a humidity, sound or CO2 sensor.
type EnvironmentSensor struct {
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	MeasurementMin *float64 `json:"measurement_min,omitempty"`
	// +optional
	MeasurementMax *float64 `json:"measurement_max,omitempty"`
	// +optional
	MeasurementUnit string `json:"measurement_unit,omitempty"`
	// +optional
	Accuracy *float64 `json:"accuracy,omitempty"`
	// +optional
	SamplingFrequency *FrequencyRange `json:"sampling_frequency,omitempty"`
}

// FrequencyRange is a range of sampling frequencies in Hz.
type FrequencyRange struct {
	// +optional
	Min *float64 `json:"min,omitempty"`
	// +optional
	Max *float64 `json:"max,omitempty"`
}

// DistributedStorageService tells whether the node serves storage.
type DistributedStorageService struct {
	// +optional
	Member bool `json:"member,omitempty"`
	// AvailableSpace for the storage service in GB.
	// +kubebuilder:validation:Minimum=0
	// +optional
	AvailableSpace *float64 `json:"available_space,omitempty"`
}

// NodeEnvironment is the node's software environment.
type NodeEnvironment struct {
	// +kubebuilder:validation:Enum=virtualized;native;bare_metal
	// +optional
	NodeType string `json:"node_type,omitempty"`
	// +kubebuilder:validation:Enum=ubuntu;kali;zephyr
	// +optional
	OS string `json:"os,omitempty"`
	// +kubebuilder:validation:items:Enum=containerd;docker;emb_serve
	// +optional
	ContainerRuntime []string `json:"container_runtime,omitempty"`
}

// NodeAccelerationAPI is an accelerated call the node serves.
type NodeAccelerationAPI struct {
	// +kubebuilder:validation:Enum=calc_optical_flow;image_inference
	CallName string `json:"call_name"`
	// SupportedPlatforms that serve the call.
	// +kubebuilder:validation:MinItems=1
	SupportedPlatforms []SupportedPlatform `json:"supported_platforms"`
}

// SupportedPlatform is a platform serving an accelerated call.
type SupportedPlatform struct {
	// +kubebuilder:validation:Enum=cpu;gpu;fpga;tpu
	// +optional
	Name string `json:"name,omitempty"`
	// SupportedFrameworks (upstream spells the key "suported_frameworks";
	// the loader accepts both).
	// +kubebuilder:validation:items:Enum=pytorch;tensorflow;opencl
	// +optional
	SupportedFrameworks []string `json:"supported_frameworks,omitempty"`
}

// NodeHardware is the node's hardware.
type NodeHardware struct {
	// +optional
	CPU *NodeCPU `json:"cpu,omitempty"`
	// +optional
	MCU *NodeMCU `json:"mcu,omitempty"`
	// Memory in GB.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Memory int64 `json:"memory,omitempty"`
	// Disk space in GB.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Disk int64 `json:"disk,omitempty"`
	// +optional
	GPU *NodeGPU `json:"gpu,omitempty"`
	// +optional
	FPGA *NodeFPGA `json:"fpga,omitempty"`
}

// NodeCPU is the node's CPU.
type NodeCPU struct {
	// +optional
	Model string `json:"model,omitempty"`
	// +kubebuilder:validation:Enum=amd64;arm64
	// +optional
	Architecture string `json:"architecture,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +optional
	Cores int32 `json:"cores,omitempty"`
	// Frequency lists every CPU frequency the node can run at, in Hz.
	// +kubebuilder:validation:items:Minimum=1
	// +optional
	Frequency []int64 `json:"frequency,omitempty"`
	// PerformanceIndicator quantifies the processing capability.
	// +optional
	PerformanceIndicator *float64 `json:"performance_indicator,omitempty"`
}

// NodeMCU is the node's microcontroller.
type NodeMCU struct {
	// +kubebuilder:validation:Enum=arm-M4;arm-m4
	// +optional
	Architecture string `json:"architecture,omitempty"`
	// Flash memory size.
	// +optional
	Flash string `json:"flash,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +optional
	Cores int32 `json:"cores,omitempty"`
	// Frequency in Hz.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Frequency int64 `json:"frequency,omitempty"`
	// +optional
	PerformanceIndicator *float64 `json:"performance_indicator,omitempty"`
}

// NodeGPU is the node's GPU model; Instances identical GPUs are installed.
type NodeGPU struct {
	// Model is the GPU product name, as NVIDIA GPU feature discovery reports
	// it (e.g. NVIDIA-H100-80GB-HBM3); older upstream names such as k80 and
	// k40 are accepted too.
	// +optional
	Model string `json:"model,omitempty"`
	// Memory of one GPU in GB.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Memory int64 `json:"memory,omitempty"`
	// Instances is the number of GPUs.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	Instances int32 `json:"instances,omitempty"`
	// +optional
	PerformanceIndicator *float64 `json:"performance_indicator,omitempty"`
}

// NodeFPGA is the node's FPGA.
type NodeFPGA struct {
	// Model of the FPGA board (e.g. zcu102).
	// +optional
	Model string `json:"model,omitempty"`
	// Memory in GB.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Memory int64 `json:"memory,omitempty"`
	// +optional
	PerformanceIndicator *float64 `json:"performance_indicator,omitempty"`
}

// NetworkResources are the node's network interfaces.
type NetworkResources struct {
	// BasicInterface carries control traffic and, by default, application
	// traffic.
	// +optional
	BasicInterface *BasicInterface `json:"basic_interface,omitempty"`
	// RedirectionInterface lists interfaces application traffic can be
	// redirected to.
	// +optional
	RedirectionInterface []RedirectionInterface `json:"redirection_interface,omitempty"`
}

// BasicInterface is the node's main interface.
type BasicInterface struct {
	// +kubebuilder:validation:Enum="4g";"5g";wifi;bluetooth;lora;zigbee;ethernet
	// +optional
	Name string `json:"name,omitempty"`
	// Range of a wireless interface.
	// +optional
	Range *float64 `json:"range,omitempty"`
	// +optional
	InterfaceName string `json:"interface_name,omitempty"`
	// ApplicationTrafficPermission: the interface may carry application traffic.
	// +optional
	ApplicationTrafficPermission bool `json:"application_traffic_permission,omitempty"`
}

// RedirectionInterface is an interface for redirected application traffic.
type RedirectionInterface struct {
	// +kubebuilder:validation:Enum="4g";"5g";wifi;bluetooth;lora;zigbee;ethernet
	ConnectionType string `json:"connection_type"`
	// +optional
	Range *float64 `json:"range,omitempty"`
	// +optional
	InterfaceName string `json:"interface_name,omitempty"`
	// +kubebuilder:validation:Enum=infrastructure;adhoc
	// +optional
	Mode string `json:"mode,omitempty"`
	// +optional
	HardwareAddress string `json:"hardware_address,omitempty"`
	// +optional
	PairingInfo *PairingInfo `json:"pairing_info,omitempty"`
}

// PairingInfo is how to join a redirection network.
type PairingInfo struct {
	// +optional
	IPAddress string `json:"ip_address,omitempty"`
	// NetworkSSID is the SSID or PAN id.
	// +optional
	NetworkSSID string `json:"network_ssid,omitempty"`
	// NetKey is the network's key.
	// +optional
	NetKey string `json:"net_key,omitempty"`
}

// Power describes the node's power supply and the owner's targets.
type Power struct {
	// +optional
	Target *PowerTarget `json:"target,omitempty"`
	// +optional
	MaxConsumption *PowerValue `json:"max_consumption,omitempty"`
	// Grid: the node is powered from the grid.
	// +optional
	Grid bool `json:"grid,omitempty"`
	// +optional
	Renewable []RenewableSource `json:"renewable,omitempty"`
	// +optional
	Battery *Battery `json:"battery,omitempty"`
}

// PowerTarget is the node owner's power goals.
type PowerTarget struct {
	// +optional
	Consumption *EnergyTarget `json:"consumption,omitempty"`
	// Cost per measurement unit; no currency assumed.
	// +optional
	Cost *EnergyTarget `json:"cost,omitempty"`
	// +optional
	CO2Emission *EmissionTarget `json:"co2_emission,omitempty"`
}

// EnergyTarget is a target on energy.
type EnergyTarget struct {
	// +optional
	Value *float64 `json:"value,omitempty"`
	// Relation (upstream's misspelt lower_or_qqual is read as lower_or_equal).
	// +kubebuilder:validation:Enum=lower_or_equal;greater_or_equal;equal;lower_than;greater_than
	// +optional
	Relation Relation `json:"relation,omitempty"`
	// +kubebuilder:validation:Enum=wh;kwh;Mwh
	// +optional
	MeasurementUnit string `json:"measurement_unit,omitempty"`
}

// EmissionTarget is a target on CO2 emission per energy unit.
type EmissionTarget struct {
	// +optional
	Value *float64 `json:"value,omitempty"`
	// +kubebuilder:validation:Enum=lower_or_equal;greater_or_equal;equal;lower_than;greater_than
	// +optional
	Relation Relation `json:"relation,omitempty"`
	// +kubebuilder:validation:Enum="kt/wh";"kt/kwh";"kt/Mwh"
	// +optional
	MeasurementUnit string `json:"measurement_unit,omitempty"`
}

// PowerValue is an amount of power.
type PowerValue struct {
	// +optional
	Value *float64 `json:"value,omitempty"`
	// +kubebuilder:validation:Enum=w;kw;Mw
	// +optional
	Unit string `json:"unit,omitempty"`
}

// RenewableSource is a renewable power source of the node.
type RenewableSource struct {
	// +kubebuilder:validation:Enum=solar_panel
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Production *EnergyLevels `json:"production,omitempty"`
}

// Battery is the node's battery.
type Battery struct {
	// +optional
	Capacity *EnergyLevels `json:"capacity,omitempty"`
}

// MLSysOpsNodeStatus is the observed state of a node.
type MLSysOpsNodeStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is the state of the node's agent.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
