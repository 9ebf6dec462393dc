package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
)

// Deployments runs model deployments; *deploy.Manager implements it.
// Errors the client caused are *httpapi.Error.
type Deployments interface {
	Create(ctx context.Context, spec api.DeploymentSpec, by string) (api.Deployment, error)
	Get(ctx context.Context, id string) (api.Deployment, error)
	List(ctx context.Context, owner, model, after string, limit int) ([]api.Deployment, string, error)
	Update(ctx context.Context, id string, spec api.DeploymentSpec, by string) (api.Deployment, error)
	Delete(ctx context.Context, id string) (api.Deployment, error)
	Predict(ctx context.Context, id string, req api.PredictRequest, by string) (api.Prediction, error)
	// Infer forwards an Open Inference Protocol request and returns the
	// model server's status and body.
	Infer(ctx context.Context, id string, body []byte, by string) (int, []byte, error)
	Explain(ctx context.Context, id string, req api.ExplainRequest) (api.Explanation, error)
	// Authorize checks a download token of a deployment's init container
	// and returns the model the file must belong to.
	Authorize(ctx context.Context, deploymentID, fileID, token string) (string, error)
}

// Operations records and lists predictions; *ops.Store implements it.
type Operations interface {
	Record(ctx context.Context, op api.OperationCreate) (api.Operation, error)
	List(ctx context.Context, owner, deployment string, after int64, limit int) ([]api.Operation, int64, error)
}

// Runtimes keeps the serving runtimes; *runtimes.Registry implements it.
type Runtimes interface {
	List(ctx context.Context) ([]api.Runtime, error)
	Put(ctx context.Context, rt api.Runtime, by string) (api.Runtime, bool, error)
	Delete(ctx context.Context, name string) error
}

// Drift runs and lists drift checks; *drift.Detector implements it.
type Drift interface {
	Run(ctx context.Context, modelID, trigger string) (api.DriftRun, error)
	Results(ctx context.Context, modelID string, after int64, limit int) ([]api.DriftResult, int64, error)
	Chart(ctx context.Context, modelID string) ([]byte, error)
}

var errNoDeployments = httpapi.Unavailable("model deployment (the connector runs without a northbound API)", errors.New("no northbound API configured"))

func (a *API) deployments() (Deployments, error) {
	if a.cfg.Deployments == nil {
		return nil, errNoDeployments
	}
	return a.cfg.Deployments, nil
}

// decodeDeployment reads a deployment request: 400 when the body is not
// JSON, 422 listing every problem.
func decodeDeployment(data []byte) (api.DeploymentSpec, error) {
	var spec api.DeploymentSpec
	if err := httpapi.DecodeJSON(data, &spec); err != nil {
		return spec, err
	}
	if ps := spec.Validate(); len(ps) > 0 {
		return spec, invalidBody("deployment", ps)
	}
	return spec, nil
}

func (a *API) createDeployment(w http.ResponseWriter, r *http.Request) error {
	d, err := a.create(r)
	if err != nil {
		return err
	}
	w.Header().Set("Location", api.DeploymentPath(d.DeploymentID))
	httpapi.WriteJSON(w, http.StatusCreated, d)
	return nil
}

func (a *API) create(r *http.Request) (api.Deployment, error) {
	deps, err := a.deployments()
	if err != nil {
		return api.Deployment{}, err
	}
	data, _, err := httpapi.ReadBody(r, httpapi.JSONBody(a.cfg.MaxBodyBytes))
	if err != nil {
		return api.Deployment{}, err
	}
	spec, err := decodeDeployment(data)
	if err != nil {
		return api.Deployment{}, err
	}
	d, err := deps.Create(r.Context(), spec, caller(r))
	return d, classify(err)
}

// upstreamCreateDeployment is POST /deployment/add: 201 with upstream's
// MLDeploymentReturn fields (the request, deployment_id and status).
func (a *API) upstreamCreateDeployment(w http.ResponseWriter, r *http.Request) error {
	return a.createDeployment(w, r)
}

func (a *API) getDeployment(w http.ResponseWriter, r *http.Request) error {
	deps, err := a.deployments()
	if err != nil {
		return err
	}
	d, err := deps.Get(r.Context(), chi.URLParam(r, "deployment_id"))
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, d)
	return nil
}

// upstreamDeploymentStatus is GET /deployment/get/status/{id}.
func (a *API) upstreamDeploymentStatus(w http.ResponseWriter, r *http.Request) error {
	deps, err := a.deployments()
	if err != nil {
		return err
	}
	d, err := deps.Get(r.Context(), chi.URLParam(r, "deployment_id"))
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, api.UpstreamStatus{DeploymentID: d.DeploymentID, Status: d.Phase, Response: d})
	return nil
}

func (a *API) listDeploymentsQuery(r *http.Request, limitDefault int) (owner, model string, p pageQuery, err error) {
	var problems []api.Problem
	q := r.URL.Query()
	owner, model = q.Get("owner"), q.Get("model")
	for _, c := range []struct{ field, v string }{{"owner", owner}, {"model", model}} {
		if len(c.v) > 128 || !api.CleanString(c.v) {
			problems = append(problems, api.Problem{Field: c.field, Type: httpapi.FieldInvalid, Message: "Invalid value: at most 128 printable characters"})
		}
	}
	p = readPage(r, &problems)
	if q.Get("limit") == "" {
		p.limit = limitDefault
	}
	if len(problems) > 0 {
		return "", "", p, httpapi.InvalidQuery(problems)
	}
	return owner, model, p, nil
}

func (a *API) listDeployments(w http.ResponseWriter, r *http.Request) error {
	deps, err := a.deployments()
	if err != nil {
		return err
	}
	owner, model, p, err := a.listDeploymentsQuery(r, api.DefaultLimit)
	if err != nil {
		return err
	}
	list, next, err := deps.List(r.Context(), owner, model, p.after, p.limit)
	if err != nil {
		return classify(err)
	}
	if list == nil {
		list = []api.Deployment{}
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Page[api.Deployment]{Items: list, Continue: continueToken(next)})
	return nil
}

// upstreamAllDeployments is GET /deployment/all: an array; skip and
// limit, which upstream ignored, are honoured.
func (a *API) upstreamAllDeployments(w http.ResponseWriter, r *http.Request) error {
	deps, err := a.deployments()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	skip, limit := 0, api.DefaultLimit
	var problems []api.Problem
	for _, p := range []struct {
		name string
		dst  *int
		min  int
	}{{"skip", &skip, 0}, {"limit", &limit, 1}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < p.min || n > 1_000_000 {
				problems = append(problems, api.Problem{Field: p.name, Type: httpapi.FieldInvalid, Message: fmt.Sprintf("Invalid value: %q: a whole number from %d", v, p.min)})
				continue
			}
			*p.dst = n
		}
	}
	if len(problems) > 0 {
		return httpapi.InvalidQuery(problems)
	}
	out := []api.Deployment{}
	after, seen := "", 0
	for len(out) < min(limit, api.MaxLimit) {
		page, next, err := deps.List(r.Context(), "", "", after, api.MaxLimit)
		if err != nil {
			return classify(err)
		}
		for _, d := range page {
			if seen >= skip && len(out) < min(limit, api.MaxLimit) {
				out = append(out, d)
			}
			seen++
		}
		if next == "" {
			break
		}
		after = next
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}

// patchDeployment merges a JSON merge patch into the deployment's request
// (version, replicas, resources, placement, runtime, image); modelid,
// ownerid and deployment_id cannot change. A new version rolls out
// without downtime.
func (a *API) patchDeployment(w http.ResponseWriter, r *http.Request) error {
	deps, err := a.deployments()
	if err != nil {
		return err
	}
	data, _, err := httpapi.ReadBody(r, httpapi.BodyRule{
		Accept:   func(m httpapi.MediaType) bool { return m.Type == "" || m.IsJSON() },
		Accepted: "application/merge-patch+json or application/json", Limit: a.cfg.MaxBodyBytes,
	})
	if err != nil {
		return err
	}
	var patch map[string]any
	if err := json.Unmarshal(data, &patch); err != nil || patch == nil {
		return httpapi.BadRequest("the body is not a JSON object (a JSON merge patch of the deployment)")
	}
	id := chi.URLParam(r, "deployment_id")
	cur, err := deps.Get(r.Context(), id)
	if err != nil {
		return classify(err)
	}
	var problems []api.Problem
	for _, k := range []string{"deployment_id", "modelid", "ownerid"} {
		if v, ok := patch[k]; ok {
			if s, _ := v.(string); s != map[string]string{"deployment_id": cur.DeploymentID, "modelid": cur.ModelID, "ownerid": cur.OwnerID}[k] {
				problems = append(problems, api.Problem{Field: k, Type: httpapi.FieldInvalid, Message: "Invalid value: cannot change; create another deployment"})
			}
		}
	}
	if len(problems) > 0 {
		return invalidBody("deployment change", problems)
	}
	b, _ := json.Marshal(cur.DeploymentSpec)
	var doc map[string]any
	_ = json.Unmarshal(b, &doc)
	merged, _ := json.Marshal(mergePatch(doc, patch))
	spec, err := decodeDeployment(merged)
	if err != nil {
		return err
	}
	d, err := deps.Update(r.Context(), id, spec, caller(r))
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, d)
	return nil
}

// deleteDeployment is DELETE /v1/deployments/{id} and upstream's DELETE
// /deployment/{id}: the application, its workloads and the deployment's
// operations go. 202 while removal runs.
func (a *API) deleteDeployment(w http.ResponseWriter, r *http.Request) error {
	deps, err := a.deployments()
	if err != nil {
		return err
	}
	id := chi.URLParam(r, "deployment_id")
	d, err := deps.Delete(r.Context(), id)
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusAccepted, struct {
		api.Message
		Deployment api.Deployment `json:"deployment"`
	}{api.Message{Message: "deployment " + id + " is being removed with everything it created"}, d})
	return nil
}

func (a *API) predict(w http.ResponseWriter, r *http.Request) error {
	deps, err := a.deployments()
	if err != nil {
		return err
	}
	var req api.PredictRequest
	if err := a.readJSON(r, &req); err != nil {
		return err
	}
	p, err := deps.Predict(r.Context(), chi.URLParam(r, "deployment_id"), req, caller(r))
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, p)
	return nil
}

// infer passes an Open Inference Protocol request through to the model
// server and its answer back.
func (a *API) infer(w http.ResponseWriter, r *http.Request) error {
	deps, err := a.deployments()
	if err != nil {
		return err
	}
	data, _, err := httpapi.ReadBody(r, httpapi.JSONBody(a.cfg.MaxBodyBytes))
	if err != nil {
		return err
	}
	if !json.Valid(data) {
		return httpapi.BadRequest("the body is not valid JSON (an Open Inference Protocol inference request)")
	}
	status, body, err := deps.Infer(r.Context(), chi.URLParam(r, "deployment_id"), data, caller(r))
	if err != nil {
		return classify(err)
	}
	w.Header().Set("Content-Type", httpapi.MediaJSON)
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return nil
}

func (a *API) explain(w http.ResponseWriter, r *http.Request) error {
	deps, err := a.deployments()
	if err != nil {
		return err
	}
	var req api.ExplainRequest
	if err := a.readJSON(r, &req); err != nil {
		return err
	}
	e, err := deps.Explain(r.Context(), chi.URLParam(r, "deployment_id"), req)
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, e)
	return nil
}

// serveDownload serves an artifact to a deployment's init container. The
// path is public; the token in the query, made for this deployment and
// file, authorises it.
func (a *API) serveDownload(w http.ResponseWriter, r *http.Request) error {
	deps, err := a.deployments()
	if err != nil {
		return err
	}
	depID, fileID := chi.URLParam(r, "deployment_id"), chi.URLParam(r, "file_id")
	modelID, err := deps.Authorize(r.Context(), depID, fileID, r.URL.Query().Get("token"))
	if err != nil {
		return classify(err)
	}
	return a.stream(w, r, modelID, fileID)
}
