// Package client is the Go client of the ML connector's API, used by the
// mls CLI and the tests. It travels on the northbound client's transport
// (the same tokens, CA and errors: *nbclient.Error carries the problem
// document, *nbclient.ConnectionError a failure to reach the server).
//
//	c, err := client.New(client.FromEnv())
//	m, err := c.CreateModel(ctx, spec)
//	up, err := c.Upload(ctx, m.ModelID, api.FileModel, "model.onnx", file, "")
//	d, err := c.CreateDeployment(ctx, api.DeploymentSpec{ModelID: m.ModelID, OwnerID: "me"})
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// Environment variables FromEnv reads.
const (
	// EnvURL is upstream's name of the connector's URL.
	EnvURL = "MLS_MLCONNECTOR_ENDPOINT"
	// EnvToken is the bearer token, the northbound API's.
	EnvToken = nbclient.EnvToken
	EnvCA    = nbclient.EnvCA
)

// DefaultURL is where the connector listens after `make up`.
const DefaultURL = "http://127.0.0.1:8090"

// Config says how to reach the connector.
type Config struct {
	URL     string
	Token   string
	CAFile  string
	Timeout time.Duration
	// HTTPClient replaces the default client.
	HTTPClient *http.Client
	UserAgent  string
}

// FromEnv reads MLS_MLCONNECTOR_ENDPOINT, MLS_TOKEN and MLS_CA_FILE.
func FromEnv() Config {
	return Config{URL: os.Getenv(EnvURL), Token: os.Getenv(EnvToken), CAFile: os.Getenv(EnvCA)}
}

// Client calls the connector.
type Client struct{ c *nbclient.Client }

// New returns a client.
func New(cfg Config) (*Client, error) {
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute // uploads
	}
	c, err := nbclient.New(nbclient.Config{URL: cfg.URL, Token: cfg.Token, CAFile: cfg.CAFile, Timeout: cfg.Timeout,
		HTTPClient: cfg.HTTPClient, UserAgent: cfg.UserAgent})
	if err != nil {
		return nil, fmt.Errorf("ML connector: %w (set %s)", err, EnvURL)
	}
	return &Client{c: c}, nil
}

// URL is the connector's base URL.
func (c *Client) URL() string { return c.c.URL() }

// do sends a request and decodes a 2xx JSON answer into out; another
// status is an *nbclient.Error.
func (c *Client) do(ctx context.Context, method, path string, body []byte, contentType string, out any) (*nbclient.Response, error) {
	resp, err := c.c.Do(ctx, method, path, body, contentType, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		e := &nbclient.Error{Method: method, URL: path, StatusCode: resp.StatusCode}
		if json.Unmarshal(resp.Body, &e.Problem) != nil || e.Problem.Detail == "" {
			e.Problem.Detail = strings.TrimSpace(string(resp.Body))
		}
		return resp, e
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return resp, fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return resp, nil
}

func (c *Client) jsonCall(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	ct := ""
	if body != nil {
		ct = "application/json"
	}
	_, err := c.do(ctx, method, path, body, ct, out)
	return err
}

func modelPath(id string, rest ...string) string {
	p := api.ModelPath(id)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

func depPath(id string, rest ...string) string {
	p := api.DeploymentPath(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// CreateModel registers a model.
func (c *Client) CreateModel(ctx context.Context, spec api.ModelSpec) (api.Model, error) {
	var m api.Model
	return m, c.jsonCall(ctx, http.MethodPost, api.PathModels, spec, &m)
}

// CreateModelRaw registers a model from a JSON body as written.
func (c *Client) CreateModelRaw(ctx context.Context, body []byte) (api.Model, error) {
	var m api.Model
	_, err := c.do(ctx, http.MethodPost, api.PathModels, body, "application/json", &m)
	return m, err
}

// Model returns one model.
func (c *Client) Model(ctx context.Context, id string) (api.Model, error) {
	var m api.Model
	return m, c.jsonCall(ctx, http.MethodGet, modelPath(id), nil, &m)
}

// ModelFilter filters and pages a model list.
type ModelFilter struct {
	Kind, Name string
	Tags       []string
	Limit      int
	Continue   string
}

// Models returns a page of models.
func (c *Client) Models(ctx context.Context, f ModelFilter) (api.Page[api.Model], error) {
	q := url.Values{}
	if f.Kind != "" {
		q.Set("kind", f.Kind)
	}
	if f.Name != "" {
		q.Set("name", f.Name)
	}
	for _, t := range f.Tags {
		q.Add("tag", t)
	}
	page(q, f.Limit, f.Continue)
	var p api.Page[api.Model]
	return p, c.jsonCall(ctx, http.MethodGet, api.PathModels+query(q), nil, &p)
}

func page(q url.Values, limit int, cont string) {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cont != "" {
		q.Set("continue", cont)
	}
}

func query(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// PatchModel merges a JSON merge patch into a model's description.
func (c *Client) PatchModel(ctx context.Context, id string, patch []byte) (api.Model, error) {
	var m api.Model
	_, err := c.do(ctx, http.MethodPatch, modelPath(id), patch, "application/merge-patch+json", &m)
	return m, err
}

// DeleteModel deletes a model with its files.
func (c *Client) DeleteModel(ctx context.Context, id string) error {
	return c.jsonCall(ctx, http.MethodDelete, modelPath(id), nil, nil)
}

// Upload sends a file of a model (kind model, data, code or env); a model
// file makes a new version. format may be empty.
func (c *Client) Upload(ctx context.Context, modelID, kind, fileName string, content io.Reader, format string) (api.Uploaded, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("file_kind", kind)
	if format != "" {
		_ = mw.WriteField("format", format)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, fileName))
	h.Set("Content-Type", "application/octet-stream")
	w, err := mw.CreatePart(h)
	if err != nil {
		return api.Uploaded{}, err
	}
	if _, err := io.Copy(w, content); err != nil {
		return api.Uploaded{}, err
	}
	if err := mw.Close(); err != nil {
		return api.Uploaded{}, err
	}
	var up api.Uploaded
	_, err = c.do(ctx, http.MethodPost, modelPath(modelID, "files"), buf.Bytes(), mw.FormDataContentType(), &up)
	return up, err
}

// Files lists a model's files.
func (c *Client) Files(ctx context.Context, modelID string) ([]api.Artifact, error) {
	var p api.Page[api.Artifact]
	return p.Items, c.jsonCall(ctx, http.MethodGet, modelPath(modelID, "files"), nil, &p)
}

// Download returns a file's content.
func (c *Client) Download(ctx context.Context, modelID, fileID string) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, modelPath(modelID, "files", fileID, "content"), nil, "", nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Versions lists a model's versions, newest first.
func (c *Client) Versions(ctx context.Context, modelID string) ([]api.Version, error) {
	var p api.Page[api.Version]
	return p.Items, c.jsonCall(ctx, http.MethodGet, modelPath(modelID, "versions"), nil, &p)
}

// Version resolves a version number, alias or latest.
func (c *Client) Version(ctx context.Context, modelID, ref string) (api.Version, error) {
	var v api.Version
	return v, c.jsonCall(ctx, http.MethodGet, modelPath(modelID, "versions", ref), nil, &v)
}

// SetAlias points an alias at a version.
func (c *Client) SetAlias(ctx context.Context, modelID, alias string, version int) (api.Version, error) {
	var v api.Version
	return v, c.jsonCall(ctx, http.MethodPut, modelPath(modelID, "aliases", alias), api.AliasRequest{Version: version}, &v)
}

// DeleteAlias removes an alias.
func (c *Client) DeleteAlias(ctx context.Context, modelID, alias string) error {
	return c.jsonCall(ctx, http.MethodDelete, modelPath(modelID, "aliases", alias), nil, nil)
}

// RunDrift checks a model's drift now.
func (c *Client) RunDrift(ctx context.Context, modelID string) (api.DriftRun, error) {
	var r api.DriftRun
	return r, c.jsonCall(ctx, http.MethodPost, modelPath(modelID, "drift"), nil, &r)
}

// DriftResults returns a page of a model's stored results, newest first.
func (c *Client) DriftResults(ctx context.Context, modelID string, limit int, cont string) (api.Page[api.DriftResult], error) {
	q := url.Values{}
	page(q, limit, cont)
	var p api.Page[api.DriftResult]
	return p, c.jsonCall(ctx, http.MethodGet, modelPath(modelID, "drift")+query(q), nil, &p)
}

// DriftChart returns the PNG chart of a model's drift.
func (c *Client) DriftChart(ctx context.Context, modelID string) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, modelPath(modelID, "drift", "chart.png"), nil, "", nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Runtimes lists the serving runtimes.
func (c *Client) Runtimes(ctx context.Context) ([]api.Runtime, error) {
	var p api.Page[api.Runtime]
	return p.Items, c.jsonCall(ctx, http.MethodGet, api.PathRuntimes, nil, &p)
}

// PutRuntime registers or replaces a runtime.
func (c *Client) PutRuntime(ctx context.Context, rt api.Runtime) (api.Runtime, error) {
	var out api.Runtime
	return out, c.jsonCall(ctx, http.MethodPut, api.PathRuntimes+"/"+url.PathEscape(rt.Name), rt, &out)
}

// DeleteRuntime removes a registered runtime.
func (c *Client) DeleteRuntime(ctx context.Context, name string) error {
	return c.jsonCall(ctx, http.MethodDelete, api.PathRuntimes+"/"+url.PathEscape(name), nil, nil)
}

// CreateDeployment deploys a model version.
func (c *Client) CreateDeployment(ctx context.Context, spec api.DeploymentSpec) (api.Deployment, error) {
	var d api.Deployment
	return d, c.jsonCall(ctx, http.MethodPost, api.PathDeployments, spec, &d)
}

// Deployment returns one deployment.
func (c *Client) Deployment(ctx context.Context, id string) (api.Deployment, error) {
	var d api.Deployment
	return d, c.jsonCall(ctx, http.MethodGet, depPath(id), nil, &d)
}

// Deployments returns a page of deployments, filtered by owner and model.
func (c *Client) Deployments(ctx context.Context, owner, model string, limit int, cont string) (api.Page[api.Deployment], error) {
	q := url.Values{}
	if owner != "" {
		q.Set("owner", owner)
	}
	if model != "" {
		q.Set("model", model)
	}
	page(q, limit, cont)
	var p api.Page[api.Deployment]
	return p, c.jsonCall(ctx, http.MethodGet, api.PathDeployments+query(q), nil, &p)
}

// PatchDeployment changes a deployment (a JSON merge patch: version,
// replicas, resources, placement, runtime, image).
func (c *Client) PatchDeployment(ctx context.Context, id string, patch any) (api.Deployment, error) {
	b, err := json.Marshal(patch)
	if err != nil {
		return api.Deployment{}, err
	}
	var d api.Deployment
	_, err = c.do(ctx, http.MethodPatch, depPath(id), b, "application/merge-patch+json", &d)
	return d, err
}

// DeleteDeployment starts removing a deployment.
func (c *Client) DeleteDeployment(ctx context.Context, id string) error {
	return c.jsonCall(ctx, http.MethodDelete, depPath(id), nil, nil)
}

// Predict asks a deployment for a prediction.
func (c *Client) Predict(ctx context.Context, id string, req api.PredictRequest) (api.Prediction, error) {
	var p api.Prediction
	return p, c.jsonCall(ctx, http.MethodPost, depPath(id, "predict"), req, &p)
}

// Infer passes an Open Inference Protocol request and returns the answer.
func (c *Client) Infer(ctx context.Context, id string, body []byte) (json.RawMessage, error) {
	resp, err := c.do(ctx, http.MethodPost, depPath(id, "infer"), body, "application/json", nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Explain asks for the Shapley values of one row.
func (c *Client) Explain(ctx context.Context, id string, req api.ExplainRequest) (api.Explanation, error) {
	var e api.Explanation
	return e, c.jsonCall(ctx, http.MethodPost, depPath(id, "explain"), req, &e)
}

// Operations returns a page of operations, newest first.
func (c *Client) Operations(ctx context.Context, owner, deployment string, limit int, cont string) (api.Page[api.Operation], error) {
	q := url.Values{}
	if owner != "" {
		q.Set("owner", owner)
	}
	if deployment != "" {
		q.Set("deployment", deployment)
	}
	page(q, limit, cont)
	var p api.Page[api.Operation]
	return p, c.jsonCall(ctx, http.MethodGet, api.PathOperations+query(q), nil, &p)
}

// RecordOperation records an operation served elsewhere.
func (c *Client) RecordOperation(ctx context.Context, op api.OperationCreate) (api.Operation, error) {
	var out api.Operation
	return out, c.jsonCall(ctx, http.MethodPost, api.PathOperations, op, &out)
}
