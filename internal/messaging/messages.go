package messaging

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"strings"
	"time"
)

// Payload types of the catalogue. Descriptions and specs travel as raw JSON so
// this package does not depend on the API types; handlers decode them with
// the types of internal/api/v1.

// Subscribe registers a child with its parent ("subscribe").
type Subscribe struct {
	// Name is the agent's name (its host name).
	Name string `json:"name"`
	// Layer is the child's layer.
	Layer Layer `json:"layer"`
	// Cluster is the cluster the child belongs to, for node agents.
	Cluster string `json:"cluster,omitempty"`
	// Version is the agent's build version.
	Version string `json:"version,omitempty"`
}

// SubscribeAck answers Subscribe ("sub_ack").
type SubscribeAck struct {
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
	// HeartbeatIntervalMillis tells the child how often to send heartbeats;
	// zero keeps the child's configuration.
	HeartbeatIntervalMillis int64 `json:"heartbeat_interval_ms,omitempty"`
}

// Heartbeat is the periodic liveness signal of a child ("heartbeat").
type Heartbeat struct {
	Name          string `json:"name"`
	UptimeSeconds int64  `json:"uptime_seconds"`
	// Status is a short health word such as "ok" or "degraded".
	Status string `json:"status,omitempty"`
}

// NodeDescriptionSubmitted carries a node's system description
// ("node_sys_desc_submitted").
type NodeDescriptionSubmitted struct {
	Node string `json:"node"`
	// Description is the MLSysOpsNode description, in the upstream file form
	// (`{"MLSysOpsNode": {...}}`) or as the spec object.
	Description json.RawMessage `json:"description"`
}

// NodeStateSync asks the cluster for the node's applications
// ("node_state_sync").
type NodeStateSync struct {
	Node string `json:"node"`
}

// NodeState answers NodeStateSync ("node_state").
type NodeState struct {
	Node         string                     `json:"node"`
	Applications map[string]NodeApplication `json:"applications"`
}

// NodeApplication is one application's slice on a node.
type NodeApplication struct {
	Name string `json:"name"`
	// Components maps a component name to its pod spec.
	Components map[string]json.RawMessage `json:"components"`
	// Spec is the application spec filtered to this node's components.
	Spec json.RawMessage `json:"spec,omitempty"`
}

// ComponentPlaced tells a node a component now runs on it
// ("application_component_placed").
type ComponentPlaced struct {
	// Name is the application name.
	Name          string `json:"name"`
	ComponentName string `json:"component_name"`
	Node          string `json:"node,omitempty"`
	// Spec is the application spec filtered to this node's components.
	Spec json.RawMessage `json:"spec,omitempty"`
	// PodSpec is the component's pod spec as deployed.
	PodSpec json.RawMessage `json:"pod_spec,omitempty"`
}

// ComponentUpdated tells a node a placed component changed
// ("application_component_updated").
type ComponentUpdated ComponentPlaced

// ComponentRemoved tells a node a component is gone
// ("application_component_removed").
type ComponentRemoved struct {
	Name          string `json:"name"`
	ComponentName string `json:"component_name"`
	Node          string `json:"node,omitempty"`
}

// PlanSubmitted hands a node's plan to the cluster's fluidity mechanism
// ("message_to_fluidity").
type PlanSubmitted struct {
	PlanUID     string `json:"plan_uid"`
	Node        string `json:"node"`
	Application string `json:"application,omitempty"`
	// Mechanism is the mechanism the plan targets, "fluidity" by default.
	Mechanism string `json:"mechanism,omitempty"`
	// Plan is the mechanism command in the upstream shape.
	Plan json.RawMessage `json:"plan"`
}

// Plan outcomes reported by PlanExecuted.
const (
	PlanCompleted = "Completed"
	PlanFailed    = "Failed"
)

// PlanExecuted reports the outcome of a plan to the node
// ("message_to_fluidity_proxy").
type PlanExecuted struct {
	PlanUID string `json:"plan_uid"`
	// Status is PlanCompleted or PlanFailed.
	Status  string          `json:"status"`
	Message string          `json:"message,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
}

// TelemetryReport carries the latest telemetry samples ("telemetry_report").
type TelemetryReport struct {
	Node    string             `json:"node"`
	Time    time.Time          `json:"time"`
	Metrics map[string]float64 `json:"metrics"`
}

// ScrapeTargets lists every metrics endpoint a node agent should scrape:
// the declared metrics port of each running pod of a managed component on
// that node ("scrape_targets"). Each message replaces the previous list.
type ScrapeTargets struct {
	Node    string         `json:"node"`
	Targets []ScrapeTarget `json:"targets"`
}

// ScrapeTarget is one pod's metrics endpoint.
type ScrapeTarget struct {
	Application string `json:"application"`
	Component   string `json:"component"`
	Pod         string `json:"pod"`
	// Address is the pod's IP and metrics port, host:port.
	Address string `json:"address"`
	// Path is the HTTP path of the metrics, /metrics when empty.
	Path string `json:"path,omitempty"`
}

// ApplicationMetrics carries application metrics one node scraped, as its
// cluster received them ("application_metrics").
type ApplicationMetrics struct {
	Cluster string    `json:"cluster"`
	Node    string    `json:"node"`
	Time    time.Time `json:"time"`
	// Series are the node's application series.
	Series []MetricSeries `json:"series"`
}

// MetricSeries is the latest value of one series.
type MetricSeries struct {
	Name string `json:"name"`
	// Labels identify the series; application series carry app,
	// component and pod.
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
}

// TelemetryIntervalUpdate changes a child's telemetry interval
// ("otel_node_interval_update"). Upstream sent a one-element list by
// accident; this is the object.
type TelemetryIntervalUpdate struct {
	Node            string  `json:"node"`
	IntervalSeconds float64 `json:"interval_seconds"`
}

// TelemetryDeploy asks the cluster to (re)deploy a node's collector
// ("otel_deploy").
type TelemetryDeploy struct {
	Node string `json:"node"`
	// Config is the collector configuration (YAML).
	Config          string  `json:"otel_config"`
	IntervalSeconds float64 `json:"interval_seconds"`
}

// TelemetryRemove asks the cluster to remove a node's collector
// ("otel_remove").
type TelemetryRemove struct {
	Node string `json:"node"`
}

// NodeExporterDeploy asks the cluster to deploy a node's exporter
// ("node_exporter_deploy").
type NodeExporterDeploy struct {
	Node  string   `json:"node"`
	Port  int      `json:"port"`
	Flags []string `json:"flags,omitempty"`
}

// NodeExporterRemove asks the cluster to remove a node's exporter
// ("node_exporter_remove").
type NodeExporterRemove struct {
	Node string `json:"node"`
}

// Quantity is an allocatable and a free amount of one resource.
type Quantity struct {
	Allocatable int64 `json:"allocatable"`
	Free        int64 `json:"free"`
}

// GPUCapacity counts the GPUs of one model in a cluster.
type GPUCapacity struct {
	Total int `json:"total"`
	Free  int `json:"free"`
	// MemoryMiB is the memory of one GPU of this model, when known.
	MemoryMiB int64 `json:"memory_mib,omitempty"`
}

// CapacityReport is a cluster's free capacity ("cluster_capacity_report").
type CapacityReport struct {
	Cluster string    `json:"cluster"`
	Time    time.Time `json:"time"`
	// ReadyNodes is the number of schedulable, ready nodes.
	ReadyNodes int `json:"ready_nodes"`
	// CPUMillis is CPU in millicores.
	CPUMillis Quantity `json:"cpu_millis"`
	// MemoryBytes is memory in bytes.
	MemoryBytes Quantity `json:"memory_bytes"`
	// GPUs maps a GPU model (the nvidia.com/gpu.product label) to its counts.
	GPUs map[string]GPUCapacity `json:"gpus,omitempty"`
	// Shapes are what groups of nodes have in common: labels but the host
	// name, allocatable resources and taints. A node that names its shape
	// leaves them out, so a report of a thousand nodes of a few kinds
	// stays small.
	Shapes []NodeShape `json:"shapes,omitempty"`
	// Nodes lists every node with what cluster placement filters on. It is
	// left out when the list would make the report too large; the
	// continuum then reads the nodes through Karmada.
	Nodes []NodeCapacity `json:"nodes,omitempty"`
}

// NodeShape is what the nodes of a CapacityReport that name it share.
type NodeShape struct {
	// Labels but kubernetes.io/hostname, which is each node's name.
	Labels      map[string]string `json:"labels,omitempty"`
	Allocatable map[string]string `json:"allocatable"`
	Taints      []string          `json:"taints,omitempty"`
}

// NodeCapacity is one node of a CapacityReport.
type NodeCapacity struct {
	Name string `json:"name"`
	// Ready is the node's Ready condition.
	Ready bool `json:"ready"`
	// Unschedulable is set on cordoned nodes.
	Unschedulable bool `json:"unschedulable,omitempty"`
	// Taints lists the NoSchedule and NoExecute taints as key=value:effect.
	Taints []string `json:"taints,omitempty"`
	// Labels are the node's labels (GPU products, layers, architecture).
	Labels map[string]string `json:"labels,omitempty"`
	// Allocatable and Requested map resource names to quantities
	// ("4", "16Gi", "1"): what the node offers and what its pods request.
	Allocatable map[string]string `json:"allocatable,omitempty"`
	Requested   map[string]string `json:"requested,omitempty"`
	// Shape, when not zero, is the 1-based position in the report's
	// Shapes of the node's shape: the node has its labels plus
	// kubernetes.io/hostname set to the node's name, its allocatable
	// resources and its taints, and leaves out its own.
	Shape int `json:"shape,omitempty"`
}

// ComponentStatus is the status of one component of an application.
type ComponentStatus struct {
	Node    string `json:"node,omitempty"`
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
	// Nodes run its replicas; Replicas are wanted (0 only when a plan
	// stopped it) and ReadyReplicas ready, as the cluster agent wrote
	// them in the application's status in its member.
	Nodes         []string `json:"nodes,omitempty"`
	Replicas      int32    `json:"replicas,omitempty"`
	ReadyReplicas int32    `json:"ready_replicas,omitempty"`
}

// ApplicationStatusReport is an application's status in one cluster
// ("application_status_report").
type ApplicationStatusReport struct {
	Application string                     `json:"application"`
	Cluster     string                     `json:"cluster"`
	Phase       string                     `json:"phase"`
	Message     string                     `json:"message,omitempty"`
	Components  map[string]ComponentStatus `json:"components,omitempty"`
	Time        time.Time                  `json:"time"`
}

// Management modes carried by ManagementMode (upstream PUT /manage/mode/{0,1}).
const (
	ModeHeuristic = 0
	ModeML        = 1
)

// Resubscribe asks a child to subscribe again ("resubscribe"): its parent
// hears from it but has no record of its subscription, as after a restart
// the child did not notice.
type Resubscribe struct {
	Reason string `json:"reason,omitempty"`
}

// ManagementMode switches an agent's management mode ("ch_mode").
type ManagementMode struct {
	Mode   int    `json:"mode"`
	Reason string `json:"reason,omitempty"`
}

// Ping is an application-level round trip ("ping").
type Ping struct {
	Note string `json:"note,omitempty"`
}

// Pong answers Ping ("pong").
type Pong struct {
	Note string `json:"note,omitempty"`
}

// Ack acknowledges, cumulatively, every message of the receiver's Stream up to
// and including Upto ("ack"). Rejected lists the sequence numbers among them
// that were refused, with the reason.
type Ack struct {
	Stream   string      `json:"stream"`
	Upto     uint64      `json:"upto"`
	Rejected []Rejection `json:"rejected,omitempty"`
}

// Rejection names one refused message in an Ack.
type Rejection struct {
	Seq    uint64 `json:"seq"`
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// ErrorReply answers a request whose handler failed ("error").
type ErrorReply struct {
	Message string `json:"message"`
}

// MessageType implements Message.
func (*Subscribe) MessageType() Type { return TypeSubscribe }

// MessageType implements Message.
func (*SubscribeAck) MessageType() Type { return TypeSubscribeAck }

// MessageType implements Message.
func (*Heartbeat) MessageType() Type { return TypeHeartbeat }

// MessageType implements Message.
func (*NodeDescriptionSubmitted) MessageType() Type { return TypeNodeDescriptionSubmitted }

// MessageType implements Message.
func (*NodeStateSync) MessageType() Type { return TypeNodeStateSync }

// MessageType implements Message.
func (*NodeState) MessageType() Type { return TypeNodeState }

// MessageType implements Message.
func (*ComponentPlaced) MessageType() Type { return TypeComponentPlaced }

// MessageType implements Message.
func (*ComponentUpdated) MessageType() Type { return TypeComponentUpdated }

// MessageType implements Message.
func (*ComponentRemoved) MessageType() Type { return TypeComponentRemoved }

// MessageType implements Message.
func (*PlanSubmitted) MessageType() Type { return TypePlanSubmitted }

// MessageType implements Message.
func (*PlanExecuted) MessageType() Type { return TypePlanExecuted }

// MessageType implements Message.
func (*TelemetryReport) MessageType() Type { return TypeTelemetryReport }

// MessageType implements Message.
func (*ScrapeTargets) MessageType() Type { return TypeScrapeTargets }

// MessageType implements Message.
func (*ApplicationMetrics) MessageType() Type { return TypeApplicationMetrics }

// MessageType implements Message.
func (*TelemetryIntervalUpdate) MessageType() Type { return TypeTelemetryIntervalUpdate }

// MessageType implements Message.
func (*TelemetryDeploy) MessageType() Type { return TypeTelemetryDeploy }

// MessageType implements Message.
func (*TelemetryRemove) MessageType() Type { return TypeTelemetryRemove }

// MessageType implements Message.
func (*NodeExporterDeploy) MessageType() Type { return TypeNodeExporterDeploy }

// MessageType implements Message.
func (*NodeExporterRemove) MessageType() Type { return TypeNodeExporterRemove }

// MessageType implements Message.
func (*CapacityReport) MessageType() Type { return TypeCapacityReport }

// MessageType implements Message.
func (*ApplicationStatusReport) MessageType() Type { return TypeApplicationStatusReport }

// MessageType implements Message.
func (*ManagementMode) MessageType() Type { return TypeManagementMode }

// MessageType implements Message.
func (*Resubscribe) MessageType() Type { return TypeResubscribe }

// MessageType implements Message.
func (*Ping) MessageType() Type { return TypePing }

// MessageType implements Message.
func (*Pong) MessageType() Type { return TypePong }

// MessageType implements Message.
func (*Ack) MessageType() Type { return TypeAck }

// MessageType implements Message.
func (*ErrorReply) MessageType() Type { return TypeError }

var errMissing = errors.New("missing required field")

func required(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return fmt.Errorf("%w %q", errMissing, pairs[i])
		}
	}
	return nil
}

func requiredJSON(name string, raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("%w %q", errMissing, name)
	}
	return nil
}

// Validate checks the required fields.
func (m *Subscribe) Validate() error {
	if !m.Layer.Valid() {
		return fmt.Errorf("invalid layer %q", m.Layer)
	}
	return required("name", m.Name)
}

// Validate checks the required fields.
func (m *Heartbeat) Validate() error { return required("name", m.Name) }

// Validate checks the required fields.
func (m *NodeDescriptionSubmitted) Validate() error {
	if err := required("node", m.Node); err != nil {
		return err
	}
	return requiredJSON("description", m.Description)
}

// Validate checks the required fields.
func (m *NodeStateSync) Validate() error { return required("node", m.Node) }

// Validate checks the required fields.
func (m *NodeState) Validate() error { return required("node", m.Node) }

// Validate checks the required fields.
func (m *ComponentPlaced) Validate() error {
	return required("name", m.Name, "component_name", m.ComponentName)
}

// Validate checks the required fields.
func (m *ComponentUpdated) Validate() error {
	return required("name", m.Name, "component_name", m.ComponentName)
}

// Validate checks the required fields.
func (m *ComponentRemoved) Validate() error {
	return required("name", m.Name, "component_name", m.ComponentName)
}

// Validate checks the required fields.
func (m *PlanSubmitted) Validate() error {
	if err := required("plan_uid", m.PlanUID, "node", m.Node); err != nil {
		return err
	}
	return requiredJSON("plan", m.Plan)
}

// Validate checks the required fields.
func (m *PlanExecuted) Validate() error {
	if err := required("plan_uid", m.PlanUID); err != nil {
		return err
	}
	if m.Status != PlanCompleted && m.Status != PlanFailed {
		return fmt.Errorf("status must be %q or %q, got %q", PlanCompleted, PlanFailed, m.Status)
	}
	return nil
}

// Validate checks the required fields.
func (m *TelemetryReport) Validate() error { return required("node", m.Node) }

// Validate checks the node and every target: application, component and
// pod named, address a host:port.
func (m *ScrapeTargets) Validate() error {
	var errs []error
	if err := required("node", m.Node); err != nil {
		errs = append(errs, err)
	}
	for i, t := range m.Targets {
		if err := required("application", t.Application, "component", t.Component, "pod", t.Pod); err != nil {
			errs = append(errs, fmt.Errorf("targets[%d]: %w", i, err))
		}
		if _, port, err := net.SplitHostPort(t.Address); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("targets[%d].address %q: want host:port", i, t.Address))
		}
		if t.Path != "" && !strings.HasPrefix(t.Path, "/") {
			errs = append(errs, fmt.Errorf("targets[%d].path %q: want an absolute path", i, t.Path))
		}
	}
	return errors.Join(errs...)
}

// Validate checks the required fields and that every series has a name
// and a finite value.
func (m *ApplicationMetrics) Validate() error {
	var errs []error
	if err := required("cluster", m.Cluster, "node", m.Node); err != nil {
		errs = append(errs, err)
	}
	for i, s := range m.Series {
		if s.Name == "" {
			errs = append(errs, fmt.Errorf("series[%d].name: %w", i, errMissing))
		}
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			errs = append(errs, fmt.Errorf("series[%d].value: not a finite number", i))
		}
	}
	return errors.Join(errs...)
}

// Validate checks the required fields.
func (m *TelemetryIntervalUpdate) Validate() error {
	if m.IntervalSeconds <= 0 {
		return fmt.Errorf("interval_seconds must be positive, got %v", m.IntervalSeconds)
	}
	return required("node", m.Node)
}

// Validate checks the required fields.
func (m *TelemetryDeploy) Validate() error { return required("node", m.Node) }

// Validate checks the required fields.
func (m *TelemetryRemove) Validate() error { return required("node", m.Node) }

// Validate checks the required fields.
func (m *NodeExporterDeploy) Validate() error {
	if m.Port < 1 || m.Port > 65535 {
		return fmt.Errorf("port %d out of range", m.Port)
	}
	return required("node", m.Node)
}

// Validate checks the required fields.
func (m *NodeExporterRemove) Validate() error { return required("node", m.Node) }

// Validate checks the required fields.
func (m *CapacityReport) Validate() error {
	for model, g := range m.GPUs {
		if g.Free < 0 || g.Total < 0 || g.Free > g.Total {
			return fmt.Errorf("gpus[%s]: free %d and total %d inconsistent", model, g.Free, g.Total)
		}
	}
	for i, n := range m.Nodes {
		if n.Name == "" {
			return fmt.Errorf("nodes[%d].name: required", i)
		}
		if n.Shape < 0 || n.Shape > len(m.Shapes) {
			return fmt.Errorf("nodes[%d].shape: %d is not one of the %d shapes", i, n.Shape, len(m.Shapes))
		}
	}
	return required("cluster", m.Cluster)
}

// Validate checks the required fields and the replica counts.
func (m *ApplicationStatusReport) Validate() error {
	var errs []error
	if err := required("application", m.Application, "phase", m.Phase); err != nil {
		errs = append(errs, err)
	}
	names := make([]string, 0, len(m.Components))
	for name := range m.Components {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := m.Components[name]
		if name == "" {
			errs = append(errs, errors.New("components: a component without a name"))
		}
		if c.Replicas < 0 || c.ReadyReplicas < 0 {
			errs = append(errs, fmt.Errorf("components.%s: replicas (%d) and ready_replicas (%d) must not be negative", name, c.Replicas, c.ReadyReplicas))
		}
	}
	return errors.Join(errs...)
}

// Validate implements Message: every field is optional.
func (*Resubscribe) Validate() error { return nil }

// Validate checks the mode.
func (m *ManagementMode) Validate() error {
	if m.Mode != ModeHeuristic && m.Mode != ModeML {
		return fmt.Errorf("mode must be %d or %d, got %d", ModeHeuristic, ModeML, m.Mode)
	}
	return nil
}

// Validate checks the required fields.
func (m *Ack) Validate() error {
	if m.Upto == 0 {
		return fmt.Errorf("upto must be positive")
	}
	return required("stream", m.Stream)
}
