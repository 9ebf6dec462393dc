package api

// Bodies of the upstream-compatible paths, with the upstream key names so
// that upstream clients (the Python mls CLI, the ML connector) keep working.

// UpstreamDeployed answers POST /apps/deploy.
type UpstreamDeployed struct {
	AppID  string `json:"app_id"`
	Status string `json:"status"`
}

// UpstreamStatusMap answers GET /apps/list_all/ and /ml/list_all/.
type UpstreamStatusMap struct {
	SystemStatus map[string]string `json:"System_status"`
}

// UpstreamAppStatus answers GET /apps/status/{app_id}.
type UpstreamAppStatus struct {
	AppID  string `json:"app_id"`
	Status string `json:"status"`
}

// UpstreamAppDetails answers GET /apps/apps/details/{app_id}; upstream
// always returned an empty component list, this one is filled in.
type UpstreamAppDetails struct {
	AppID      string                   `json:"app_id"`
	State      string                   `json:"state"`
	Components []UpstreamComponentState `json:"components"`
}

// UpstreamComponentState is one component in UpstreamAppDetails, in the
// shape the upstream CLI reads (details.pods).
type UpstreamComponentState struct {
	Name    string                   `json:"name"`
	Cluster string                   `json:"cluster,omitempty"`
	Details UpstreamComponentDetails `json:"details"`
}

// UpstreamComponentDetails lists a component's pods.
type UpstreamComponentDetails struct {
	Pods []UpstreamPod `json:"pods"`
}

// UpstreamPod is one pod of a component: its node and whether it is ready.
type UpstreamPod struct {
	PodName string `json:"pod_name"`
	Node    string `json:"node_name"`
	Status  string `json:"pod_status"`
}

// UpstreamRemoved answers DELETE /apps/remove/{app_id}.
type UpstreamRemoved struct {
	AppID   string `json:"app_id"`
	Message string `json:"message"`
}

// UpstreamResult is the {"status", "message"} body of /ml/deploy_ml,
// /manage/ping and /manage/mode.
type UpstreamResult struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	// Response is the agent's answer to /manage/ping.
	Response any `json:"response,omitempty"`
	// DeploymentID is the id of the deployment /ml/deploy_ml queued
	// (not in upstream).
	DeploymentID string `json:"deployment_id,omitempty"`
}

// UpstreamModelStatus answers GET /ml/status/{model_uid}. Upstream's key
// was "Model " with a trailing space; both spellings are sent.
type UpstreamModelStatus struct {
	Model       string `json:"model"`
	ModelLegacy string `json:"Model "`
	Status      string `json:"status"`
	// LocalEndpoint is cluster_ip:port of the first endpoint, inside its
	// cluster; empty until the Service exists.
	LocalEndpoint string `json:"local_endpoint,omitempty"`
	// GlobalEndpoint is node_ip:node_port of the first NodePort endpoint.
	GlobalEndpoint string `json:"global_endpoint,omitempty"`
}

// UpstreamModelRemoved answers DELETE /ml/remove/{model_uid}.
type UpstreamModelRemoved struct {
	ModelUID string `json:"model_uid"`
	Message  string `json:"message"`
}
