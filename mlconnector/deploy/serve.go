package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
)

// MaxBatch bounds the rows of one prediction.
const MaxBatch = 10000

type metrics struct {
	deployments *prometheus.CounterVec
	phases      *prometheus.CounterVec
	downloads   prometheus.Counter
	predictions *prometheus.CounterVec
	latency     *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		deployments: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mlsysops", Subsystem: "mlconnector", Name: "deployments_total",
			Help: "Deployments created and removed."}, []string{"event"}),
		phases: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mlsysops", Subsystem: "mlconnector", Name: "deployment_phase_changes_total",
			Help: "Deployment phase changes by the phase entered."}, []string{"phase"}),
		downloads: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "mlsysops", Subsystem: "mlconnector", Name: "artifact_downloads_total",
			Help: "Artifact downloads authorised for init containers."}),
		predictions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mlsysops", Subsystem: "mlconnector", Name: "predictions_total",
			Help: "Requests forwarded to model servers by kind (predict, infer, explain) and outcome (ok, refused, failed)."}, []string{"kind", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "mlsysops", Subsystem: "mlconnector", Name: "forward_duration_seconds",
			Help: "Time of a forwarded request, the model server's time included.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"kind"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.deployments, m.phases, m.downloads, m.predictions, m.latency} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// target is where a deployment's predictions go.
type target struct {
	d    row
	base string
}

// targetOf finds the model server of a Ready deployment.
func (m *Manager) targetOf(ctx context.Context, id string) (target, error) {
	if len(id) > api.MaxDeploymentIDLen || !api.CleanString(id) {
		return target{}, httpapi.NotFound("no deployment %q", id)
	}
	d, err := m.row(ctx, id)
	if err != nil {
		return target{}, err
	}
	if d.deleting {
		return target{}, httpapi.Conflict("deployment %s is being removed", id)
	}
	if d.Phase != api.PhaseReady || d.Endpoint == nil {
		msg := d.Message
		if d.Reason != "" {
			msg = d.Reason + ": " + msg
		}
		return target{}, &httpapi.Error{Status: http.StatusConflict, Type: httpapi.ProblemConflict,
			Detail: fmt.Sprintf("deployment %s is %s, not Ready: %s", id, d.Phase, msg)}
	}
	port := strconv.Itoa(int(d.Serving.Port))
	var base string
	switch m.o.Access {
	case AccessService:
		base = d.Endpoint.URL
	case AccessPod:
		if ip := servingPodIP(d.Pods, d.ModelVersion); ip != "" {
			base = "http://" + net.JoinHostPort(ip, port)
		}
	default:
		if d.Endpoint.ExternalAddress != "" {
			base = "http://" + d.Endpoint.ExternalAddress
		}
	}
	if base == "" {
		return target{}, httpapi.Unavailable("the model server of deployment "+id+" (no address yet for access mode "+m.o.Access+")", nil)
	}
	return target{d: d, base: base}, nil
}

// servingPodIP picks the pod predictions go to: a ready one that is not
// terminating, of the deployment's version when one is ready (a rollout
// moves traffic to the new version as soon as it serves).
func servingPodIP(pods []api.Pod, version int) string {
	ip := ""
	for _, p := range pods {
		if !p.Ready || p.IP == "" || p.Phase == "Terminating" {
			continue
		}
		if p.ModelVersion == version {
			return p.IP
		}
		if ip == "" {
			ip = p.IP
		}
	}
	return ip
}

// forward sends a request to the model server and returns its status and
// body, and the target that answered. Connection failures and 503s (a
// replica being replaced) are tried again until the request's time is up,
// at the address the deployment's status gives then (a replaced pod's
// successor): predictions have no side effects. build makes the body for
// a target (nil: no body); it is called again when the address changes,
// since the successor may run another version whose input differs.
func (m *Manager) forward(ctx context.Context, t target, method, path string, build func(target) ([]byte, error)) (int, []byte, target, error) {
	ctx, cancel := context.WithTimeout(ctx, m.o.ForwardTimeout)
	defer cancel()
	delay := 50 * time.Millisecond
	var body []byte
	built := ""
	for attempt := 1; ; attempt++ {
		if build != nil && built != t.base {
			var err error
			if body, err = build(t); err != nil {
				return 0, nil, t, err
			}
			built = t.base
		}
		req, err := http.NewRequestWithContext(ctx, method, t.base+path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, t, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := m.hc.Do(req)
		if err == nil {
			b, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
			resp.Body.Close()
			if rerr == nil && resp.StatusCode != http.StatusServiceUnavailable {
				return resp.StatusCode, b, t, nil
			}
			err = fmt.Errorf("%s %s: %s", method, path, firstNonEmpty(string(b), resp.Status))
			if rerr != nil {
				err = rerr
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				e := httpapi.NewError(http.StatusGatewayTimeout, httpapi.ProblemTimeout, "the model server of deployment %s did not answer in time (%d attempts)", t.d.DeploymentID, attempt)
				e.Cause = err
				return 0, nil, t, e
			}
			return 0, nil, t, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
		if nt, terr := m.targetOf(ctx, t.d.DeploymentID); terr == nil {
			t.base = nt.base
		}
		m.log.Debug("model server not answering; retrying", "deployment", t.d.DeploymentID, "attempt", attempt, "err", err)
	}
}

// modelMeta is what the model server says of its model.
type modelMeta struct {
	Inputs []struct {
		Name     string  `json:"name"`
		Datatype string  `json:"datatype"`
		Shape    []int64 `json:"shape"`
	} `json:"inputs"`
	Outputs []struct {
		Name string `json:"name"`
	} `json:"outputs"`
	Parameters struct {
		Kind          string   `json:"kind"`
		Features      []string `json:"features"`
		ExplainOutput string   `json:"explain_output"`
	} `json:"parameters"`
}

func (m *Manager) metadata(ctx context.Context, t target) (*modelMeta, error) {
	key := metaKey(t)
	if v, ok := m.meta.Load(key); ok {
		return v.(*modelMeta), nil
	}
	status, body, used, err := m.forward(ctx, t, http.MethodGet, "/v2/models/"+ModelName, nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, badGateway(t.d.DeploymentID, "model metadata", status, body)
	}
	var meta modelMeta
	if err := json.Unmarshal(body, &meta); err != nil || len(meta.Inputs) == 0 {
		return nil, badGateway(t.d.DeploymentID, "model metadata", status, body)
	}
	if used.base != t.base {
		// Another replica answered: its metadata is not this one's.
		m.meta.Store(metaKey(used), &meta)
		return m.metadata(ctx, used)
	}
	m.meta.Store(key, &meta)
	return &meta, nil
}

// metaKey names a replica's metadata in the cache: its address, under
// the deployment and version.
func metaKey(t target) string {
	return t.d.DeploymentID + "/" + strconv.Itoa(t.d.ModelVersion) + "/" + t.base
}

func badGateway(id, what string, status int, body []byte) error {
	msg := strings.TrimSpace(string(body))
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return httpapi.NewError(http.StatusBadGateway, "urn:mlsysops:problem:bad-gateway", "the model server of deployment %s failed the %s request (%d): %s", id, what, status, msg)
}

// rows reads the data of a prediction: one object of feature values, or a
// list of them.
func rows(data json.RawMessage) ([]map[string]json.RawMessage, bool, error) {
	t := bytes.TrimSpace(data)
	if len(t) == 0 || string(t) == "null" {
		return nil, false, httpapi.Invalid("data is required", []api.Problem{{Field: "data", Type: httpapi.FieldRequired, Message: "Required value: {feature: value, ...} or a list of them"}})
	}
	if t[0] == '{' {
		var one map[string]json.RawMessage
		if err := json.Unmarshal(t, &one); err != nil {
			return nil, false, httpapi.Invalid("data is not an object", []api.Problem{{Field: "data", Type: httpapi.FieldTypeInvalid, Message: err.Error()}})
		}
		return []map[string]json.RawMessage{one}, false, nil
	}
	var many []map[string]json.RawMessage
	if err := json.Unmarshal(t, &many); err != nil || t[0] != '[' {
		return nil, false, httpapi.Invalid("data must be an object of feature values or a list of them", []api.Problem{{Field: "data", Type: httpapi.FieldTypeInvalid,
			Message: "Invalid value: want {feature: value, ...} or [{...}, ...]"}})
	}
	switch {
	case len(many) == 0:
		return nil, false, httpapi.Invalid("data is an empty list", []api.Problem{{Field: "data", Type: httpapi.FieldRequired, Message: "Required value: at least one row"}})
	case len(many) > MaxBatch:
		return nil, false, httpapi.Invalid("too many rows", []api.Problem{{Field: "data", Type: httpapi.FieldTooMany, Message: fmt.Sprintf("Too many: %d: at most %d rows", len(many), MaxBatch)}})
	}
	return many, true, nil
}

// featureMatrix maps rows of feature values to the model's inputs, in the
// order of the feature list; every problem is reported with its path.
func featureMatrix(inputs []api.Feature, rs []map[string]json.RawMessage, batch bool) ([]float64, error) {
	if len(inputs) == 0 {
		return nil, httpapi.Invalid("the model lists no input features", []api.Problem{{Field: "data", Type: httpapi.FieldInvalid,
			Message: "Invalid value: the model's featurelist has no input (kind 0); send an Open Inference Protocol request to /infer instead"}})
	}
	known := map[string]bool{}
	for _, f := range inputs {
		known[f.FeatureName] = true
	}
	var problems []api.Problem
	out := make([]float64, 0, len(rs)*len(inputs))
	for i, r := range rs {
		prefix := "data"
		if batch {
			prefix = fmt.Sprintf("data[%d]", i)
		}
		for _, f := range inputs {
			raw, ok := r[f.FeatureName]
			if !ok {
				problems = append(problems, api.Problem{Field: prefix + "." + f.FeatureName, Type: httpapi.FieldRequired, Message: "Required value: an input feature of the model"})
				out = append(out, 0)
				continue
			}
			x, msg := featureValue(raw, f)
			if msg != "" {
				problems = append(problems, api.Problem{Field: prefix + "." + f.FeatureName, Type: httpapi.FieldTypeInvalid, Message: msg})
			}
			out = append(out, x)
		}
		var extra []string
		for k := range r {
			if !known[k] {
				extra = append(extra, k)
			}
		}
		sort.Strings(extra)
		for _, k := range extra {
			problems = append(problems, api.Problem{Field: prefix + "." + k, Type: httpapi.FieldNotSupported, Message: "Unsupported value: not an input feature of the model"})
		}
		if len(problems) > 50 {
			break
		}
	}
	if len(problems) > 0 {
		return nil, httpapi.Invalid(fmt.Sprintf("the input has %d problem(s); each is listed with its field path", len(problems)), problems)
	}
	return out, nil
}

func featureValue(raw json.RawMessage, f api.Feature) (float64, string) {
	var x float64
	if err := json.Unmarshal(raw, &x); err == nil {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, "Invalid value: not a finite number"
		}
		return x, ""
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		if b {
			return 1, ""
		}
		return 0, ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return v, ""
		}
		if f.Type == api.FeatureCategorical {
			return 0, fmt.Sprintf("Invalid value: %q: the model reads numbers; send the category's numeric code", s)
		}
	}
	return 0, "Invalid value: want a number"
}

// oipInput is the one input tensor the built-in server's models take.
func oipInput(meta *modelMeta, values []float64, n, width int) map[string]any {
	dt := meta.Inputs[0].Datatype
	if dt == "" {
		dt = "FP32"
	}
	return map[string]any{"name": meta.Inputs[0].Name, "shape": []int{n, width}, "datatype": dt, "data": values}
}

// oipResponse is an Open Inference Protocol inference response.
type oipResponse struct {
	Outputs []json.RawMessage `json:"outputs"`
}

type oipOutput struct {
	Name  string          `json:"name"`
	Shape []int64         `json:"shape"`
	Data  json.RawMessage `json:"data"`
}

// inference is the prediction per row: a classifier's label, else the
// first output's values per row.
func inference(meta *modelMeta, outs []json.RawMessage, n int) any {
	var chosen *oipOutput
	for _, raw := range outs {
		var o oipOutput
		if json.Unmarshal(raw, &o) != nil {
			continue
		}
		if chosen == nil || (meta.Parameters.Kind == "classifier" && o.Name == "label") {
			c := o
			chosen = &c
		}
	}
	if chosen == nil {
		return nil
	}
	var flat []any
	if json.Unmarshal(chosen.Data, &flat) != nil || n == 0 || len(flat)%n != 0 {
		return json.RawMessage(chosen.Data)
	}
	per := len(flat) / n
	out := make([]any, n)
	for i := range out {
		if per == 1 {
			out[i] = flat[i]
		} else {
			out[i] = flat[i*per : (i+1)*per]
		}
	}
	return out
}

// Predict maps the request's feature values to the model's input,
// forwards it, records the operation and returns the prediction (with an
// explanation of a single row when asked).
func (m *Manager) Predict(ctx context.Context, id string, req api.PredictRequest, by string) (api.Prediction, error) {
	start := time.Now()
	t, err := m.targetOf(ctx, id)
	if err != nil {
		return api.Prediction{}, err
	}
	rs, batch, err := rows(req.Data)
	if err != nil {
		return api.Prediction{}, err
	}
	if req.Explanation && batch {
		return api.Prediction{}, httpapi.Invalid("an explanation is of one row", []api.Problem{{Field: "explanation", Type: httpapi.FieldInvalid,
			Message: "Invalid value: true: explanations are of one row; send data as one object"}})
	}
	model, err := m.reg.Model(ctx, t.d.ModelID)
	if err != nil {
		return api.Prediction{}, err
	}
	inputs := model.Inputs()
	values, err := featureMatrix(inputs, rs, batch)
	if err != nil {
		return api.Prediction{}, err
	}
	// The request is made for the replica it goes to (its input's
	// datatype is in its metadata).
	var meta *modelMeta
	status, out, t, err := m.forward(ctx, t, http.MethodPost, "/v2/models/"+ModelName+"/infer", func(t target) ([]byte, error) {
		var err error
		if meta, err = m.metadata(ctx, t); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"inputs": []any{oipInput(meta, values, len(rs), len(inputs))}})
	})
	if err != nil {
		m.m.predictions.WithLabelValues("predict", "failed").Inc()
		return api.Prediction{}, err
	}
	if status != http.StatusOK {
		m.m.predictions.WithLabelValues("predict", "refused").Inc()
		return api.Prediction{}, modelRefusal(t.d.DeploymentID, status, out)
	}
	var resp oipResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return api.Prediction{}, badGateway(t.d.DeploymentID, "inference", status, out)
	}
	p := api.Prediction{DeploymentID: id, ModelID: t.d.ModelID, ModelVersion: t.d.ModelVersion, Outputs: resp.Outputs}
	perRow := inference(meta, resp.Outputs, len(rs))
	if list, ok := perRow.([]any); ok && !batch && len(list) == 1 {
		p.Inference = list[0]
	} else {
		p.Inference = perRow
	}
	if req.Explanation {
		e, err := m.explain(ctx, t, inputs, values, api.ExplainRequest{})
		if err != nil {
			return api.Prediction{}, err
		}
		p.Explanation = &e
	}
	p.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	m.m.predictions.WithLabelValues("predict", "ok").Inc()
	m.m.latency.WithLabelValues("predict").Observe(time.Since(start).Seconds())
	result, _ := json.Marshal(map[string]any{"inference": p.Inference})
	op, err := m.ops.Insert(ctx, api.Operation{DeploymentID: id, ModelID: t.d.ModelID, ModelVersion: t.d.ModelVersion,
		OwnerID: t.d.OwnerID, Data: req.Data, Result: result, LatencyMS: p.LatencyMS})
	if err != nil {
		// The prediction is made; the log lags. Say so rather than fail.
		m.log.Warn("operation not recorded", "deployment", id, "err", err)
	} else {
		p.OperationID = op.OperationID
	}
	return p, nil
}

// modelRefusal turns the model server's 4xx into the client's: its
// problems keep their fields.
func modelRefusal(id string, status int, body []byte) error {
	var mp struct {
		Error    string `json:"error"`
		Problems []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"problems"`
	}
	_ = json.Unmarshal(body, &mp)
	if status/100 != 4 || mp.Error == "" {
		return badGateway(id, "inference", status, body)
	}
	e := httpapi.Invalid("the model refused the input: "+mp.Error, nil)
	for _, p := range mp.Problems {
		e.Problems = append(e.Problems, api.Problem{Field: p.Field, Type: httpapi.FieldInvalid, Message: p.Message})
	}
	return e
}

// Infer passes an Open Inference Protocol request to the model server and
// records the operation.
func (m *Manager) Infer(ctx context.Context, id string, body []byte, by string) (int, []byte, error) {
	start := time.Now()
	t, err := m.targetOf(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	status, out, _, err := m.forward(ctx, t, http.MethodPost, "/v2/models/"+ModelName+"/infer", func(target) ([]byte, error) { return body, nil })
	if err != nil {
		m.m.predictions.WithLabelValues("infer", "failed").Inc()
		return 0, nil, err
	}
	latency := float64(time.Since(start).Microseconds()) / 1000
	m.m.latency.WithLabelValues("infer").Observe(time.Since(start).Seconds())
	op := api.Operation{DeploymentID: id, ModelID: t.d.ModelID, ModelVersion: t.d.ModelVersion, OwnerID: t.d.OwnerID,
		Data: body, LatencyMS: latency}
	if status == http.StatusOK && json.Valid(out) {
		m.m.predictions.WithLabelValues("infer", "ok").Inc()
		op.Result = out
	} else {
		m.m.predictions.WithLabelValues("infer", "refused").Inc()
		op.Error = fmt.Sprintf("%d %s", status, strings.TrimSpace(string(out)))
	}
	if _, err := m.ops.Insert(ctx, op); err != nil {
		m.log.Warn("operation not recorded", "deployment", id, "err", err)
	}
	if status >= 500 {
		return 0, nil, badGateway(id, "inference", status, out)
	}
	return status, out, nil
}

// Explain returns the Shapley values of one row, computed by the model
// server against its background sample of the training data.
func (m *Manager) Explain(ctx context.Context, id string, req api.ExplainRequest) (api.Explanation, error) {
	t, err := m.targetOf(ctx, id)
	if err != nil {
		return api.Explanation{}, err
	}
	rs, batch, err := rows(req.Data)
	if err != nil {
		return api.Explanation{}, err
	}
	if batch {
		return api.Explanation{}, httpapi.Invalid("an explanation is of one row", []api.Problem{{Field: "data", Type: httpapi.FieldTypeInvalid, Message: "Invalid value: send one object of feature values"}})
	}
	switch req.Method {
	case "", "auto", "exact", "sampling":
	default:
		return api.Explanation{}, httpapi.Invalid("unknown method", []api.Problem{{Field: "method", Type: httpapi.FieldNotSupported, Message: "Unsupported value: supported values: auto, exact, sampling"}})
	}
	model, err := m.reg.Model(ctx, t.d.ModelID)
	if err != nil {
		return api.Explanation{}, err
	}
	inputs := model.Inputs()
	values, err := featureMatrix(inputs, rs, false)
	if err != nil {
		return api.Explanation{}, err
	}
	return m.explain(ctx, t, inputs, values, req)
}

func (m *Manager) explain(ctx context.Context, t target, inputs []api.Feature, values []float64, req api.ExplainRequest) (api.Explanation, error) {
	start := time.Now()
	status, out, t, err := m.forward(ctx, t, http.MethodPost, "/v2/models/"+ModelName+"/explain", func(t target) ([]byte, error) {
		meta, err := m.metadata(ctx, t)
		if err != nil {
			return nil, err
		}
		body := map[string]any{"inputs": []any{oipInput(meta, values, 1, len(inputs))}}
		if req.Output != "" {
			body["output"] = req.Output
		}
		if req.Method != "" {
			body["method"] = req.Method
		}
		if req.Seed != 0 {
			body["seed"] = req.Seed
		}
		return json.Marshal(body)
	})
	if err != nil {
		m.m.predictions.WithLabelValues("explain", "failed").Inc()
		return api.Explanation{}, err
	}
	if status != http.StatusOK {
		m.m.predictions.WithLabelValues("explain", "refused").Inc()
		if status == http.StatusNotFound || status == http.StatusNotImplemented {
			return api.Explanation{}, httpapi.Conflict("the runtime of deployment %s does not explain predictions (no /explain extension)", t.d.DeploymentID)
		}
		return api.Explanation{}, modelRefusal(t.d.DeploymentID, status, out)
	}
	// The model server names its version as a string (Open Inference
	// Protocol); the connector's answer gives the deployment's number.
	var wire struct {
		api.Explanation
		ModelVersion json.RawMessage `json:"model_version"`
	}
	if err := json.Unmarshal(out, &wire); err != nil || len(wire.ShapleyValues) == 0 {
		return api.Explanation{}, badGateway(t.d.DeploymentID, "explanation", status, out)
	}
	e := wire.Explanation
	e.DeploymentID, e.ModelVersion = t.d.DeploymentID, t.d.ModelVersion
	if len(e.ShapleyValues) == len(inputs) {
		e.Features = make([]string, len(inputs))
		for i, f := range inputs {
			e.Features[i] = f.FeatureName
		}
	}
	// Upstream's simple format, for the predicted class (the largest
	// probability) or the one output.
	k := 0
	for i, v := range e.Prediction {
		if v > e.Prediction[k] {
			k = i
		}
	}
	e.SimpleOutput = map[string]float64{}
	for i, f := range e.Features {
		if i < len(e.ShapleyValues) && k < len(e.ShapleyValues[i]) {
			e.SimpleOutput[f] = e.ShapleyValues[i][k]
		}
	}
	if k < len(e.BaseValue) && k < len(e.Prediction) {
		e.SimpleOutput["base_value"], e.SimpleOutput["F(x)"] = e.BaseValue[k], e.Prediction[k]
	}
	m.m.predictions.WithLabelValues("explain", "ok").Inc()
	m.m.latency.WithLabelValues("explain").Observe(time.Since(start).Seconds())
	return e, nil
}
