package v1

// ContinuumLayer is a layer of the computing continuum.
type ContinuumLayer string

// Continuum layers. LayerAny is only valid in placement constraints.
const (
	LayerCloud              ContinuumLayer = "cloud"
	LayerEdgeInfrastructure ContinuumLayer = "edge_infrastructure"
	LayerEdge               ContinuumLayer = "edge"
	LayerFarEdge            ContinuumLayer = "far_edge"
	LayerAny                ContinuumLayer = "*"
)

// CPU architectures.
const (
	ArchAMD64 = "amd64"
	ArchARM64 = "arm64"
)

// Relation compares a measured value with a target.
type Relation string

// Relations.
const (
	RelationLowerOrEqual   Relation = "lower_or_equal"
	RelationGreaterOrEqual Relation = "greater_or_equal"
	RelationEqual          Relation = "equal"
	RelationLowerThan      Relation = "lower_than"
	RelationGreaterThan    Relation = "greater_than"
)

// PermittedActionAll permits every action, in both application and node
// permitted_actions lists.
const PermittedActionAll = "*"

// Actions an application's permitted_actions may list (upstream names).
const (
	// AppActionComponentRelocation covers plans that change the nodes a
	// component runs on: fluidity move, deploy (except in an initial
	// plan) and remove.
	AppActionComponentRelocation = "component_relocation"
	AppActionTrafficRedirection  = "traffic_redirection"
	// AppActionChangeContainerImage covers change_spec of a container's
	// image or image_pull_policy.
	AppActionChangeContainerImage = "change_container_image"
	// AppActionChangeContainerRuntimeClass covers change_spec of
	// runtime_class_name.
	AppActionChangeContainerRuntimeClass = "change_container_runtime_class"
	AppActionChangeContainerCPUSet       = "change_container_cpu_set"
	// AppActionChangeContainerResourceRequirements covers change_spec of a
	// container's platform_requirements.
	AppActionChangeContainerResourceRequirements = "change_container_resource_requirements"
	// AppActionAcceleration covers change_spec of a container's
	// acceleration_api.
	AppActionAcceleration = "acceleration"
)

// Condition types used in the status of MLSysOps objects.
const (
	// ConditionReady is true when the object is fully in effect: an
	// application runs every component, an agent serves its description.
	ConditionReady = "Ready"
	// ConditionPlaced is true when an application has a cluster (continuum
	// level) or nodes (cluster level) for every component.
	ConditionPlaced = "Placed"
	// ConditionValid is false when the spec failed semantic validation;
	// its message lists every problem.
	ConditionValid = "Valid"
)

// Phase is the coarse state of a system description object (node, cluster,
// continuum, datacenter) as reported by the agent that owns it.
// +kubebuilder:validation:Enum=Pending;Ready;NotReady;Unknown
type Phase string

// Phases of system description objects.
const (
	PhasePending  Phase = "Pending"
	PhaseReady    Phase = "Ready"
	PhaseNotReady Phase = "NotReady"
	PhaseUnknown  Phase = "Unknown"
)

// EnergyLevels is a list of energy levels with their unit.
type EnergyLevels struct {
	// Levels are energy values in Unit.
	// +optional
	Levels []float64 `json:"levels,omitempty"`
	// Unit of Levels.
	// +kubebuilder:validation:Enum=wh
	// +optional
	Unit string `json:"unit,omitempty"`
}

// TemperatureSensor describes a temperature sensor.
type TemperatureSensor struct {
	// Instances is the number of identical sensors (node descriptions).
	// +kubebuilder:validation:Minimum=1
	// +optional
	Instances int32 `json:"instances,omitempty"`
	// Model of the sensor.
	// +kubebuilder:validation:Enum=sdc30;ds18b20
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	MeasurementMin *float64 `json:"measurement_min,omitempty"`
	// +optional
	MeasurementMax *float64 `json:"measurement_max,omitempty"`
	// +kubebuilder:validation:Enum=celsius;fahrenheit
	// +optional
	MeasurementUnit string `json:"measurement_unit,omitempty"`
	// +optional
	Accuracy *float64 `json:"accuracy,omitempty"`
	// SamplingFrequency in Hz.
	// +optional
	SamplingFrequency *float64 `json:"sampling_frequency,omitempty"`
}

// AccelerometerSensor describes an accelerometer.
type AccelerometerSensor struct {
	// +kubebuilder:validation:Enum="3038-smt"
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	MeasurementMin *float64 `json:"measurement_min,omitempty"`
	// +optional
	MeasurementMax *float64 `json:"measurement_max,omitempty"`
	// +kubebuilder:validation:Enum="m/s^2"
	// +optional
	MeasurementUnit string `json:"measurement_unit,omitempty"`
	// +optional
	Accuracy *float64 `json:"accuracy,omitempty"`
	// +optional
	SamplingFrequency *float64 `json:"sampling_frequency,omitempty"`
}

// BarometerSensor describes a barometer.
type BarometerSensor struct {
	// +kubebuilder:validation:Enum="sb-100"
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	MeasurementMin *float64 `json:"measurement_min,omitempty"`
	// +optional
	MeasurementMax *float64 `json:"measurement_max,omitempty"`
	// MeasurementUnit: pa is Pascal.
	// +kubebuilder:validation:Enum=pa
	// +optional
	MeasurementUnit string `json:"measurement_unit,omitempty"`
	// +optional
	Accuracy *float64 `json:"accuracy,omitempty"`
	// +optional
	SamplingFrequency *float64 `json:"sampling_frequency,omitempty"`
}

// AirQualitySensor describes an air quality sensor.
type AirQualitySensor struct {
	// +kubebuilder:validation:Enum="mq-135"
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	MeasurementMin *float64 `json:"measurement_min,omitempty"`
	// +optional
	MeasurementMax *float64 `json:"measurement_max,omitempty"`
	// MeasurementUnit: micrograms per cubic metre.
	// +kubebuilder:validation:Enum="ug/m^3"
	// +optional
	MeasurementUnit string `json:"measurement_unit,omitempty"`
	// +optional
	Accuracy *float64 `json:"accuracy,omitempty"`
	// +optional
	SamplingFrequency *float64 `json:"sampling_frequency,omitempty"`
}
