package api

import (
	"encoding/json"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
)

// Role is what a bearer token may do (internal/auth).
type Role = auth.Role

// Roles. A viewer may read (every GET, and pinging an agent); an operator
// may do everything.
const (
	RoleViewer   = auth.RoleViewer
	RoleOperator = auth.RoleOperator
)

// Media types the API reads and writes.
const (
	MediaJSON    = httpapi.MediaJSON
	MediaYAML    = httpapi.MediaYAML
	MediaProblem = httpapi.MediaProblem
	MediaText    = httpapi.MediaText
)

// Headers the API reads or sets.
const (
	// HeaderRequestID carries the request id: taken from the request when
	// it is well formed, generated otherwise, and always echoed.
	HeaderRequestID = httpapi.HeaderRequestID
	// HeaderIdempotencyKey makes a retried submission return the first
	// receipt instead of a conflict.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// Problem is the body of every error response (RFC 9457); see
// internal/httpapi.
type Problem = httpapi.Problem

// FieldProblem is one problem of a request body.
type FieldProblem = httpapi.FieldProblem

// Problem types (the Type of a Problem).
const (
	ProblemInvalid      = httpapi.ProblemInvalid
	ProblemConflict     = httpapi.ProblemConflict
	ProblemNotFound     = httpapi.ProblemNotFound
	ProblemUnauthorized = httpapi.ProblemUnauthorized
	ProblemForbidden    = httpapi.ProblemForbidden
	ProblemTooLarge     = httpapi.ProblemTooLarge
	ProblemMediaType    = httpapi.ProblemMediaType
	ProblemUnavailable  = httpapi.ProblemUnavailable
	ProblemTimeout      = httpapi.ProblemTimeout
	ProblemInternal     = httpapi.ProblemInternal
)

// Accepted answers a submission (deploy, update or remove) of an
// application or an ML deployment: 202 with a Location header.
type Accepted struct {
	// ID is the application name or the ML deployment id.
	ID string `json:"id"`
	// Request is deploy, update or remove.
	Request string `json:"request"`
	// Phase is the phase the submission set: Queued or Removing.
	Phase string `json:"phase"`
	// Generation counts the accepted submissions of this id.
	Generation int64 `json:"generation"`
	// Replayed is true when the Idempotency-Key had been used before and
	// nothing new was queued.
	Replayed bool `json:"replayed,omitempty"`
	// Href is the resource's URL path.
	Href string `json:"href"`
}

// Summary is one application or ML deployment in a list, as the shared
// state (Redis) has it.
type Summary struct {
	ID    string `json:"id"`
	Phase string `json:"phase"`
	// Message explains the phase.
	Message string `json:"message,omitempty"`
	// LastRequest is the latest accepted submission: deploy, update or
	// remove.
	LastRequest string `json:"last_request"`
	Generation  int64  `json:"generation"`
	// Placement maps a component to where it runs, as reported by the
	// agents.
	Placement   map[string]string `json:"placement,omitempty"`
	SubmittedAt time.Time         `json:"submitted_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
}

// List is a page of summaries.
type List struct {
	Items []Summary `json:"items"`
	// Total counts every item that matches the filter, on every page.
	Total int `json:"total"`
	// Continue, when not empty, fetches the next page (query parameter
	// continue).
	Continue string `json:"continue,omitempty"`
}

// Application is one application or ML deployment in detail.
type Application struct {
	Summary
	// PhaseSource says where Phase comes from: "resource" (the
	// MLSysOpsApp status in Karmada, written by the agents) or
	// "submission" (the shared state, while the resource does not exist
	// yet or is being removed).
	PhaseSource string `json:"phase_source"`
	// Resource is the MLSysOpsApp in Karmada; nil until the continuum
	// agent created it.
	Resource *Resource `json:"resource"`
	// Components is the placement of each component.
	Components []ComponentPlacement `json:"components"`
	// Conditions of the resource (Placed, Ready, Valid).
	Conditions []Condition `json:"conditions"`
	// Endpoints are where the components answer, once the cluster agents
	// created their Services: for an ML deployment, its inference
	// endpoint.
	Endpoints []Endpoint `json:"endpoints"`
	// Description is the submitted description, in the custom resource
	// form.
	Description json.RawMessage `json:"description,omitempty"`
	// Warnings say what could not be read (Karmada down, ...).
	Warnings []string `json:"warnings,omitempty"`
}

// Resource is what the Karmada API holds of an application.
type Resource struct {
	Namespace          string    `json:"namespace"`
	Name               string    `json:"name"`
	Phase              string    `json:"phase,omitempty"`
	Message            string    `json:"message,omitempty"`
	Generation         int64     `json:"generation"`
	ObservedGeneration int64     `json:"observed_generation"`
	CreatedAt          time.Time `json:"created_at"`
}

// ComponentPlacement is where one component runs.
type ComponentPlacement struct {
	Name string `json:"name"`
	// Cluster hosting the component; empty until placed.
	Cluster string `json:"cluster,omitempty"`
	// Nodes running its replicas.
	Nodes         []string `json:"nodes"`
	Replicas      int32    `json:"replicas"`
	ReadyReplicas int32    `json:"ready_replicas"`
	// GPUModel is the GPU product of the nodes it runs on when known, else
	// the model the description asks for.
	GPUModel string `json:"gpu_model,omitempty"`
	// GPUs is the number of GPUs one replica requests.
	GPUs    int64  `json:"gpus,omitempty"`
	Message string `json:"message,omitempty"`
	// Pods are the component's pods in its cluster, as the cluster
	// reports them (one item only; lists leave them out).
	Pods []Pod `json:"pods,omitempty"`
}

// Pod is one pod of a component in its member cluster.
type Pod struct {
	Name string `json:"name"`
	Node string `json:"node,omitempty"`
	// IP is the pod's address in its cluster's pod network.
	IP string `json:"ip,omitempty"`
	// Phase is the pod's phase (Pending, Running, Succeeded, Failed), or
	// Terminating once it is being deleted.
	Phase string `json:"phase"`
	Ready bool   `json:"ready"`
	// Reason and Message explain a pod that waits: kube-scheduler's
	// reason when it cannot be scheduled, else the pod status's.
	Reason         string           `json:"reason,omitempty"`
	Message        string           `json:"message,omitempty"`
	InitContainers []ContainerState `json:"init_containers,omitempty"`
	Containers     []ContainerState `json:"containers"`
	CreatedAt      time.Time        `json:"created_at"`
}

// ContainerState is the state of one container (or init container) of a
// pod.
type ContainerState struct {
	Name string `json:"name"`
	// Args the container runs with.
	Args []string `json:"args,omitempty"`
	// State is waiting, running or terminated.
	State string `json:"state"`
	// Reason is the kubelet's (ImagePullBackOff, CrashLoopBackOff,
	// Completed, Error, ...); Message its message, or the container's
	// termination message.
	Reason       string `json:"reason,omitempty"`
	Message      string `json:"message,omitempty"`
	ExitCode     *int32 `json:"exit_code,omitempty"`
	Ready        bool   `json:"ready"`
	RestartCount int32  `json:"restart_count"`
	// LastTermination says how the previous run ended, for a container
	// that restarted.
	LastTermination string `json:"last_termination,omitempty"`
}

// Endpoint is one port of a Service a cluster agent created for a
// component in a member cluster: a component gets one when another
// component talks to it (ClusterIP) or when it has external_access
// (NodePort, also reachable on its nodes' addresses). Every component of
// an ML deployment that declares a port has external_access. It is
// internal/members.Endpoint, field for field, in the REST API.
type Endpoint struct {
	Component string `json:"component"`
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	// Type is the Service type: ClusterIP or NodePort.
	Type     string `json:"type"`
	PortName string `json:"port_name,omitempty"`
	// Protocol is TCP, UDP or SCTP.
	Protocol  string `json:"protocol"`
	Port      int32  `json:"port"`
	ClusterIP string `json:"cluster_ip,omitempty"`
	// Address is cluster_ip:port, reachable inside the cluster (upstream's
	// local_endpoint).
	Address string `json:"address,omitempty"`
	// URL is http://<service>.<namespace>.svc:<port>, inside the cluster;
	// TCP ports only.
	URL string `json:"url,omitempty"`
	// NodePort is the port on every node of the cluster; NodePort only.
	NodePort int32 `json:"node_port,omitempty"`
	// NodeAddress is <node ip>:<node port> on a node that runs the
	// component (upstream's global_endpoint); NodePort only.
	NodeAddress string `json:"node_address,omitempty"`
	// ExternalURL is http://<node address>; NodePort TCP ports only.
	ExternalURL string `json:"external_url,omitempty"`
	// Ready is true while at least one replica of the component is ready
	// in this cluster.
	Ready bool `json:"ready"`
}

// Condition is a status condition of the resource.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"last_transition_time"`
}

// Performance is the current value of every QoS metric of an application
// against its target.
type Performance struct {
	ID      string        `json:"id"`
	Metrics []MetricValue `json:"metrics"`
	// GlobalSatisfaction weighs the metrics as the description's
	// global_satisfaction says; nil when the description has none.
	GlobalSatisfaction *Satisfaction `json:"global_satisfaction,omitempty"`
}

// MetricValue is one QoS metric of one component.
type MetricValue struct {
	Component string   `json:"component"`
	Metric    string   `json:"metric"`
	Target    *float64 `json:"target,omitempty"`
	Relation  string   `json:"relation,omitempty"`
	// Value is the latest reading; nil when there is none.
	Value *float64 `json:"value"`
	// Satisfied compares Value with Target; nil when either is unknown.
	Satisfied *bool `json:"satisfied"`
	// Node is where the value was read.
	Node      string     `json:"node,omitempty"`
	SampledAt *time.Time `json:"sampled_at,omitempty"`
	// Reason says why there is no value.
	Reason string `json:"reason,omitempty"`
}

// Satisfaction is the application-wide QoS goal and how it stands.
type Satisfaction struct {
	Threshold *float64 `json:"threshold,omitempty"`
	Relation  string   `json:"relation,omitempty"`
	// Value is the weighted share of satisfied metrics, in [0, 1]; nil
	// while a weighted metric has no value.
	Value     *float64 `json:"value"`
	Satisfied *bool    `json:"satisfied"`
}

// Continuum is the whole infrastructure.
type Continuum struct {
	// ID is the continuum_id of the continuum description, when one is
	// registered.
	ID string `json:"id,omitempty"`
	// Agent is the continuum agent; nil when none is registered.
	Agent    *AgentState `json:"agent"`
	Clusters []Cluster   `json:"clusters"`
	// Totals sums the Ready clusters.
	Totals Resources `json:"totals"`
}

// Cluster is one member cluster and its live state.
type Cluster struct {
	Name string `json:"name"`
	// Ready is Karmada's Ready condition.
	Ready   bool   `json:"ready"`
	Message string `json:"message,omitempty"`
	// Agent is the cluster agent; nil when none is registered.
	Agent     *AgentState `json:"agent"`
	NodeCount int         `json:"node_count"`
	Resources Resources   `json:"resources"`
	// Nodes is filled when one cluster is asked for.
	Nodes []Node `json:"nodes,omitempty"`
}

// ClusterList lists clusters.
type ClusterList struct {
	Items []Cluster `json:"items"`
}

// NodeList lists nodes.
type NodeList struct {
	Items []Node `json:"items"`
}

// Node is one node of a member cluster and its live state.
type Node struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	// Layer is the continuum layer (cloud, edge_infrastructure, edge,
	// far_edge) from the node's labels.
	Layer string `json:"layer,omitempty"`
	// Ready is the Kubernetes node's Ready condition.
	Ready bool `json:"ready"`
	// Agent is the node agent; nil when none is registered.
	Agent     *AgentState       `json:"agent"`
	Labels    map[string]string `json:"labels"`
	Resources Resources         `json:"resources"`
	// Described is true when a node description is registered.
	Described bool `json:"described"`
}

// Resources are allocatable and free capacity. Free subtracts the requests
// of the pods that are scheduled and not finished.
type Resources struct {
	CPU    CPU    `json:"cpu"`
	Memory Memory `json:"memory"`
	// GPUs by product (nvidia.com/gpu.product, "unknown" when unlabelled).
	GPUs map[string]GPUs `json:"gpus,omitempty"`
}

// CPU capacity in millicores.
type CPU struct {
	Allocatable int64 `json:"allocatable_millicores"`
	Free        int64 `json:"free_millicores"`
}

// Memory capacity in bytes.
type Memory struct {
	Allocatable int64 `json:"allocatable_bytes"`
	Free        int64 `json:"free_bytes"`
}

// GPUs of one product.
type GPUs struct {
	Allocatable int64 `json:"allocatable"`
	Free        int64 `json:"free"`
	// MemoryMiB of one GPU, from nvidia.com/gpu.memory.
	MemoryMiB int64 `json:"memory_mib,omitempty"`
}

// AgentState is an agent's liveness as its parent last recorded it.
type AgentState struct {
	JID      string     `json:"jid"`
	Online   bool       `json:"online"`
	LastSeen *time.Time `json:"last_seen,omitempty"`
}

// NodeRegistered answers the registration of a node description.
type NodeRegistered struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	// Created is false when an existing description was replaced.
	Created bool   `json:"created"`
	Href    string `json:"href"`
}

// Agent is one registered agent.
type Agent struct {
	JID          string    `json:"jid"`
	Layer        string    `json:"layer"`
	Cluster      string    `json:"cluster,omitempty"`
	Node         string    `json:"node,omitempty"`
	Version      string    `json:"version,omitempty"`
	Online       bool      `json:"online"`
	RegisteredAt time.Time `json:"registered_at"`
	LastSeen     time.Time `json:"last_seen"`
}

// AgentList lists agents.
type AgentList struct {
	Items []Agent `json:"items"`
}

// PingResult is one round trip to an agent over XMPP.
type PingResult struct {
	JID string `json:"jid"`
	// LatencyMillis is the round-trip time in milliseconds.
	LatencyMillis float64 `json:"latency_ms"`
	// Note is what the agent put in its pong.
	Note string `json:"note,omitempty"`
}

// ModeRequest switches the management mode of agents.
type ModeRequest struct {
	// Mode is 0 (heuristic policies) or 1 (ML-driven).
	Mode *int `json:"mode"`
	// Agents are the JIDs to switch; empty means every registered agent.
	Agents []string `json:"agents,omitempty"`
	// Reason is logged by the agents.
	Reason string `json:"reason,omitempty"`
}

// ModeResult says which agents took the new mode.
type ModeResult struct {
	Mode    int               `json:"mode"`
	Results []AgentModeResult `json:"results"`
	// Failed counts the agents that did not confirm.
	Failed int `json:"failed"`
}

// AgentModeResult is the outcome for one agent.
type AgentModeResult struct {
	JID   string `json:"jid"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Policy is one policy file of a layer.
type Policy struct {
	Layer string `json:"layer"`
	// Name is the file name, policy-<name>.star.
	Name string `json:"name"`
	Size int    `json:"size"`
	// Location is where it is kept: a ConfigMap (namespace/name) or a
	// directory.
	Location string `json:"location"`
	// Source is the policy text; only when one policy is asked for.
	Source string `json:"source,omitempty"`
}

// PolicyList lists policies.
type PolicyList struct {
	Items []Policy `json:"items"`
}

// Health answers /healthz and /readyz.
type Health = httpapi.Health
