package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"time"
)

// VersionRef names a model version: a number, an alias (production) or
// "latest" (also the empty ref). JSON numbers and strings are accepted.
type VersionRef string

// UnmarshalJSON implements json.Unmarshaler.
func (v *VersionRef) UnmarshalJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	if len(t) > 0 && t[0] == '"' {
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return err
		}
		*v = VersionRef(s)
		return nil
	}
	if string(t) == "null" {
		*v = ""
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(t, &n); err != nil {
		return &json.UnmarshalTypeError{Value: "object or array", Type: reflect.TypeOf(VersionRef(""))}
	}
	*v = VersionRef(n.String())
	return nil
}

// JSONTypeName names the type in "wrong type" problems.
func (VersionRef) JSONTypeName() string { return "a version number, an alias or \"latest\"" }

// Placement says where a deployment may run (upstream's keys).
type Placement struct {
	// ClusterID restricts the deployment to one member cluster; "" or
	// "*" means any.
	ClusterID string `json:"clusterID,omitempty"`
	// Node pins it to one node (host name); "" or "*" means any.
	Node string `json:"node,omitempty"`
	// Continuum is the continuum layer: cloud, edge_infrastructure, edge,
	// far_edge; "" or "*" means any.
	Continuum string `json:"continuum,omitempty"`
}

// GPU is a deployment's GPU request.
type GPU struct {
	// Count of GPUs per replica.
	Count int32 `json:"count"`
	// Model is the GPU product (nvidia.com/gpu.product), e.g. NVIDIA-L4.
	Model string `json:"model,omitempty"`
	// MinMemoryGB is the least memory of one GPU, in GB.
	MinMemoryGB int64 `json:"min_memory_gb,omitempty"`
}

// Resources a replica requests.
type Resources struct {
	// CPU in Kubernetes units ("500m", "2"); default 250m.
	CPU string `json:"cpu,omitempty"`
	// Memory in Kubernetes units ("512Mi"); default from the model's size.
	Memory string `json:"memory,omitempty"`
	GPU    *GPU   `json:"gpu,omitempty"`
}

// DeploymentSpec is what a user asks for: the body of POST
// /v1/deployments and of upstream's POST /deployment/add
// (MLDeploymentCreate: modelid, ownerid, placement, deployment_id,
// inference_data).
type DeploymentSpec struct {
	// DeploymentID names the deployment (a DNS label, it names the
	// MLSysOps application); "" has one generated.
	DeploymentID string `json:"deployment_id,omitempty"`
	ModelID      string `json:"modelid"`
	// OwnerID owns the deployment and its operations.
	OwnerID string `json:"ownerid"`
	// Version of the model to serve: a number, an alias or latest.
	Version   VersionRef `json:"version,omitempty"`
	Placement Placement  `json:"placement"`
	// Replicas of the model server; default 1.
	Replicas  int32     `json:"replicas,omitempty"`
	Resources Resources `json:"resources"`
	// Runtime names the serving runtime; default the one registered for
	// the version's format.
	Runtime string `json:"runtime,omitempty"`
	// Image replaces the runtime's image.
	Image string `json:"image,omitempty"`
	// InferenceData is upstream's input mode: 0 (values; the only one
	// served).
	InferenceData int `json:"inference_data"`
}

// Phases of a deployment, in lifecycle order.
const (
	PhasePending     = "Pending"
	PhasePlacing     = "Placing"
	PhaseDownloading = "Downloading"
	PhaseLoading     = "Loading"
	PhaseReady       = "Ready"
	PhaseFailed      = "Failed"
	PhaseDeleting    = "Deleting"
)

// Phases lists the phases.
var Phases = []string{PhasePending, PhasePlacing, PhaseDownloading, PhaseLoading, PhaseReady, PhaseFailed, PhaseDeleting}

// Reasons a deployment failed or waits (Deployment.Reason).
const (
	ReasonUnschedulable    = "Unschedulable"
	ReasonDownloadFailed   = "DownloadFailed"
	ReasonChecksumMismatch = "ChecksumMismatch"
	ReasonArtifactMissing  = "ArtifactMissing"
	ReasonImageCannotRun   = "ImageCannotRun"
	ReasonModelLoadFailed  = "ModelLoadFailed"
	ReasonSubmitFailed     = "SubmitFailed"
	ReasonRollingOut       = "RollingOut"
)

// Endpoint is where a Ready deployment answers.
type Endpoint struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	// URL is the in-cluster URL, http://<service>.<namespace>.svc:<port>.
	URL string `json:"url"`
	// ExternalAddress is <node ip>:<node port>, reachable from outside
	// the cluster (upstream's global_endpoint).
	ExternalAddress string `json:"external_address,omitempty"`
	// LocalAddress is <cluster ip>:<port> (upstream's local_endpoint).
	LocalAddress string `json:"local_address,omitempty"`
	// ModelName is the model's name in the Open Inference Protocol paths
	// (/v2/models/<name>/infer).
	ModelName string `json:"model_name"`
}

// Serving is how a deployment serves its model.
type Serving struct {
	Runtime string `json:"runtime"`
	Image   string `json:"image"`
	Port    int32  `json:"port"`
	Format  string `json:"format"`
}

// Pod is one pod of a deployment, as its cluster reports it.
type Pod struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	Node    string `json:"node,omitempty"`
	IP      string `json:"ip,omitempty"`
	Phase   string `json:"phase"`
	Ready   bool   `json:"ready"`
	// Stage is Downloading (the init container runs), Loading (the
	// server runs, not ready), Ready, or Failed.
	Stage   string `json:"stage"`
	Message string `json:"message,omitempty"`
	// ModelVersion the pod serves.
	ModelVersion int `json:"model_version,omitempty"`
}

// Deployment is a model deployment and how it stands.
type Deployment struct {
	DeploymentSpec
	// ModelVersion is the version served (Version resolved).
	ModelVersion int     `json:"model_version"`
	Serving      Serving `json:"serving"`
	// Phase: Pending → Placing → Downloading → Loading → Ready, or
	// Failed; Deleting once removal started.
	Phase string `json:"phase"`
	// Status repeats Phase under upstream's key.
	Status string `json:"status"`
	// Reason is a machine-readable cause of Failed or of a wait
	// (Unschedulable, DownloadFailed, ChecksumMismatch, ...).
	Reason string `json:"reason,omitempty"`
	// Message says it to a person (the per-cluster reasons of an
	// unschedulable deployment, the download error).
	Message    string     `json:"message,omitempty"`
	Endpoint   *Endpoint  `json:"endpoint,omitempty"`
	Pods       []Pod      `json:"pods,omitempty"`
	Generation int64      `json:"generation"`
	CreatedBy  string     `json:"created_by,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	ReadyAt    *time.Time `json:"ready_at,omitempty"`
}

// UpstreamStatus answers upstream's GET /deployment/get/status/{id}: the
// deployment under "response" (upstream: the northbound's answer as a
// string).
type UpstreamStatus struct {
	DeploymentID string     `json:"deployment_id"`
	Status       string     `json:"status"`
	Response     Deployment `json:"response"`
}

// Operation is one prediction served (or recorded by upstream's
// inference services through POST /deployment/add/operation).
type Operation struct {
	OperationID  int64           `json:"operationid"`
	DeploymentID string          `json:"deploymentid"`
	ModelID      string          `json:"modelid"`
	ModelVersion int             `json:"model_version,omitempty"`
	OwnerID      string          `json:"ownerid"`
	Data         json.RawMessage `json:"data"`
	Result       json.RawMessage `json:"result,omitempty"`
	Error        string          `json:"error,omitempty"`
	LatencyMS    float64         `json:"latency_ms"`
	Timestamp    time.Time       `json:"timestamp"`
}

// OperationCreate is the body of POST /v1/operations and upstream's POST
// /deployment/add/operation.
type OperationCreate struct {
	OwnerID      string          `json:"ownerid"`
	DeploymentID string          `json:"deploymentid"`
	ModelID      string          `json:"modelid"`
	Data         json.RawMessage `json:"data"`
	Result       json.RawMessage `json:"result"`
	Timestamp    *time.Time      `json:"timestamp,omitempty"`
}

// PredictRequest is the body of POST /v1/deployments/{id}/predict, the
// one upstream's inference services take: data maps each input feature
// to its value; a list of such maps is a batch.
type PredictRequest struct {
	Data        json.RawMessage `json:"data"`
	Explanation bool            `json:"explanation,omitempty"`
}

// Prediction answers a prediction.
type Prediction struct {
	DeploymentID string `json:"deployment_id"`
	ModelID      string `json:"modelid"`
	ModelVersion int    `json:"model_version"`
	// Inference is the prediction of a single row (the label of a
	// classifier, the value of a regressor), or the list of a batch's.
	Inference any `json:"inference"`
	// Outputs are the model server's outputs (Open Inference Protocol).
	Outputs     []json.RawMessage `json:"outputs"`
	OperationID int64             `json:"operation_id,omitempty"`
	LatencyMS   float64           `json:"latency_ms"`
	// Explanation of the (single) row, when asked for.
	Explanation *Explanation `json:"explanation,omitempty"`
}

// ExplainRequest is the body of POST /v1/deployments/{id}/explain: one
// row, as for a prediction.
type ExplainRequest struct {
	Data json.RawMessage `json:"data"`
	// Output to explain; default the probabilities of a classifier, the
	// prediction of a regressor.
	Output string `json:"output,omitempty"`
	// Method: auto (exact up to 10 features, sampling beyond), exact or
	// sampling.
	Method string `json:"method,omitempty"`
	// Seed of the sampling.
	Seed uint64 `json:"seed,omitempty"`
}

// Explanation gives each feature's Shapley value: for each output value k,
// the values sum to prediction[k] - base_value[k].
type Explanation struct {
	DeploymentID string    `json:"deployment_id"`
	ModelVersion int       `json:"model_version"`
	Output       string    `json:"output"`
	Method       string    `json:"method"`
	Features     []string  `json:"features"`
	BaseValue    []float64 `json:"base_value"`
	Prediction   []float64 `json:"prediction"`
	// ShapleyValues[i][k] is feature i's value for output value k.
	ShapleyValues  [][]float64 `json:"shapley_values"`
	StandardErrors [][]float64 `json:"standard_errors,omitempty"`
	// SimpleOutput is upstream's simple format for the explained output
	// value (the predicted class, or the prediction): feature to Shapley
	// value, plus base_value and F(x).
	SimpleOutput   map[string]float64 `json:"simple_output"`
	BackgroundRows int                `json:"background_rows,omitempty"`
	Evaluations    int64              `json:"evaluations,omitempty"`
}

// DriftRun is one drift check of a model.
type DriftRun struct {
	ID      int64  `json:"id"`
	ModelID string `json:"modelid"`
	// Trigger is scheduled or manual.
	Trigger       string        `json:"trigger"`
	StartedAt     time.Time     `json:"started_at"`
	FinishedAt    time.Time     `json:"finished_at"`
	SampleSize    int           `json:"sample_size"`
	ReferenceSize int           `json:"reference_size"`
	Drifting      int           `json:"drifting"`
	Message       string        `json:"message,omitempty"`
	Results       []DriftResult `json:"results"`
}

// DriftResult is one test of one feature.
type DriftResult struct {
	RunID   int64  `json:"run_id"`
	Feature string `json:"feature"`
	// Type is cont or cat.
	Type string `json:"type"`
	// Method is welch_t, ks, chi2 or mmd.
	Method    string    `json:"method"`
	Statistic float64   `json:"statistic"`
	PValue    *float64  `json:"p_value"`
	Drift     bool      `json:"drift_detected"`
	Timestamp time.Time `json:"timestamp"`
}

// Runtime serves models of some formats with an image speaking the Open
// Inference Protocol v2 on Port.
type Runtime struct {
	Name    string   `json:"name"`
	Formats []string `json:"formats"`
	Image   string   `json:"image"`
	Port    int32    `json:"port"`
	// Args of the serving container; {model_file}, {model_dir},
	// {model_name}, {model_version}, {format} and {port} are replaced.
	Args      []string  `json:"args,omitempty"`
	BuiltIn   bool      `json:"built_in"`
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at,omitempty"`
}

// Itoa formats a version number as a VersionRef.
func Itoa(v int) VersionRef { return VersionRef(strconv.Itoa(v)) }
