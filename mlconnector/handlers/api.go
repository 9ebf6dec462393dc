// Package handlers is the HTTP side of the ML connector: the versioned
// resources under /v1 (models with their files, versions and aliases;
// deployments with predictions, explanations and operations; drift;
// serving runtimes), the upstream paths (/model/..., /deployment/...) as
// aliases with upstream's bodies, and the OpenAPI document, on the
// machinery the northbound API uses (internal/httpapi): bearer tokens with
// viewer and operator roles, problem documents listing every field
// problem, access logs and per-route metrics.
//
// Every client mistake is a 4xx; an unavailable database or object store
// is a 503 with Retry-After; a 500 is a bug.
package handlers

import (
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

// openAPIYAML is the OpenAPI document, written by hand next to the routes
// it describes; TestOpenAPIMatchesRoutes keeps the two in step.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// Config is what the API needs.
type Config struct {
	// Registry keeps models and artifacts; required.
	Registry *registry.Registry
	// Deployments runs model deployments; without it the deployment
	// routes answer 503.
	Deployments Deployments
	// Operations records and lists predictions.
	Operations Operations
	// Drift runs and lists drift checks.
	Drift Drift
	// Runtimes maps model formats to serving images.
	Runtimes Runtimes
	// Auth checks bearer tokens; required.
	Auth *auth.Authenticator
	// PublicPaths are served without a token (besides the artifact
	// downloads, which carry their own token).
	PublicPaths []string
	// MaxBodyBytes bounds JSON bodies; MaxUploadBytes uploaded files.
	MaxBodyBytes   int64
	MaxUploadBytes int64
	// UploadDir holds uploads while they are received.
	UploadDir string
	// RequestTimeout bounds one request; uploads, downloads, drift runs
	// and explanations get UploadTimeout.
	RequestTimeout time.Duration
	UploadTimeout  time.Duration
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
	Gatherer       prometheus.Gatherer
	Version        string
	// Ready adds checks to /readyz (the database and the store are always
	// checked).
	Ready func(ctx context.Context) map[string]error
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes   = 4 << 20
	DefaultMaxUploadBytes = 1 << 30
	DefaultUploadTimeout  = 30 * time.Minute
)

// API is the ML connector's HTTP handler.
type API struct {
	cfg Config
	log *slog.Logger
	srv *httpapi.Server
}

var _ http.Handler = (*API)(nil)

// New builds the API.
func New(cfg Config) (*API, error) {
	if cfg.Registry == nil {
		return nil, errors.New("mlconnector: a registry is required")
	}
	if cfg.Auth == nil {
		return nil, errors.New("mlconnector: an authenticator is required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if cfg.UploadTimeout <= 0 {
		cfg.UploadTimeout = DefaultUploadTimeout
	}
	if cfg.UploadDir == "" {
		cfg.UploadDir = os.TempDir()
	}
	if cfg.PublicPaths == nil {
		cfg.PublicPaths = append([]string(nil), httpapi.DefaultPublicPaths...)
	}
	public := append(append([]string(nil), cfg.PublicPaths...), downloadsPrefix)
	a := &API{cfg: cfg}
	var routes []httpapi.Route
	for _, rt := range routeTable() {
		h := rt.handle
		timeout := time.Duration(0)
		if rt.long {
			timeout = cfg.UploadTimeout
		}
		routes = append(routes, httpapi.Route{
			Method: rt.method, Pattern: rt.pattern, Role: rt.role, Timeout: timeout,
			Handle: func(w http.ResponseWriter, r *http.Request) error { return h(a, w, r) },
		})
	}
	srv, err := httpapi.New(httpapi.Config{
		Name: "mlconnector", Auth: cfg.Auth, PublicPaths: public, RequestTimeout: cfg.RequestTimeout,
		OpenAPI: openAPIYAML, Logger: cfg.Logger, Registerer: cfg.Registerer, Gatherer: cfg.Gatherer,
		Version: cfg.Version, Ready: a.ready,
	}, routes)
	if err != nil {
		return nil, err
	}
	a.srv, a.log = srv, srv.Logger()
	return a, nil
}

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.srv.ServeHTTP(w, r) }

// Server returns the shared HTTP machinery (routes, OpenAPI, docs).
func (a *API) Server() *httpapi.Server { return a.srv }

func (a *API) ready(ctx context.Context) map[string]error {
	out := map[string]error{
		"database":       a.cfg.Registry.Pool().Ping(ctx),
		"artifact_store": a.cfg.Registry.Objects().Check(ctx),
	}
	if a.cfg.Ready != nil {
		for k, v := range a.cfg.Ready(ctx) {
			out[k] = v
		}
	}
	return out
}

// routeDef is one route, bound to the API when it is built.
type routeDef struct {
	method, pattern string
	role            auth.Role
	// long routes (uploads, downloads, drift runs, explanations) get the
	// upload timeout.
	long   bool
	handle func(a *API, w http.ResponseWriter, r *http.Request) error
}

// routeTable is the route table (internal/httpapi adds /healthz, /readyz,
// /metrics, /openapi.json and /docs); the OpenAPI document must describe
// exactly these (TestOpenAPIMatchesRoutes).
func routeTable() []routeDef {
	const (
		get, post, put, patch, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete
		viewer, operator           = auth.RoleViewer, auth.RoleOperator
	)
	r := func(method, pattern string, role auth.Role, h func(a *API, w http.ResponseWriter, r *http.Request) error) routeDef {
		return routeDef{method: method, pattern: pattern, role: role, handle: h}
	}
	long := func(d routeDef) routeDef { d.long = true; return d }
	const (
		model = "/v1/models/{model_id}"
		dep   = "/v1/deployments/{deployment_id}"
	)
	return []routeDef{
		r(get, "/v1/models", viewer, (*API).listModels),
		r(post, "/v1/models", operator, (*API).createModel),
		r(get, model, viewer, (*API).getModel),
		r(patch, model, operator, (*API).patchModel),
		r(del, model, operator, (*API).deleteModel),
		r(get, model+"/files", viewer, (*API).listFiles),
		long(r(post, model+"/files", operator, (*API).uploadFile)),
		r(get, model+"/files/{file_id}", viewer, (*API).getFile),
		long(r(get, model+"/files/{file_id}/content", viewer, (*API).downloadFile)),
		r(get, model+"/versions", viewer, (*API).listVersions),
		r(get, model+"/versions/{version}", viewer, (*API).getVersion),
		r(put, model+"/aliases/{alias}", operator, (*API).setAlias),
		r(del, model+"/aliases/{alias}", operator, (*API).deleteAlias),
		r(get, model+"/drift", viewer, (*API).listDrift),
		long(r(post, model+"/drift", operator, (*API).runDrift)),
		r(get, model+"/drift/chart.png", viewer, (*API).driftChart),

		r(get, "/v1/runtimes", viewer, (*API).listRuntimes),
		r(put, "/v1/runtimes/{name}", operator, (*API).putRuntime),
		r(del, "/v1/runtimes/{name}", operator, (*API).deleteRuntime),

		r(get, "/v1/deployments", viewer, (*API).listDeployments),
		r(post, "/v1/deployments", operator, (*API).createDeployment),
		r(get, dep, viewer, (*API).getDeployment),
		r(patch, dep, operator, (*API).patchDeployment),
		r(del, dep, operator, (*API).deleteDeployment),
		r(post, dep+"/predict", operator, (*API).predict),
		r(post, dep+"/infer", operator, (*API).infer),
		long(r(post, dep+"/explain", operator, (*API).explain)),
		r(get, dep+"/operations", viewer, (*API).deploymentOperations),
		r(get, "/v1/operations", viewer, (*API).listOperations),
		r(post, "/v1/operations", operator, (*API).recordOperation),
		long(r(get, downloadsPrefix+"{deployment_id}/{file_id}", viewer, (*API).serveDownload)),

		// Upstream paths, with upstream bodies.
		r(post, "/model/add", operator, (*API).createModel),
		long(r(post, "/model/{model_id}/upload", operator, (*API).uploadFile)),
		r(get, "/model/all", viewer, (*API).upstreamAllModels),
		r(get, "/model/getkind/{modelkind}", viewer, (*API).upstreamModelsOfKind),
		r(get, "/model/search", viewer, (*API).upstreamSearchModels),
		r(patch, "/model/{model_id}", operator, (*API).patchModel),
		r(del, "/model/{model_id}", operator, (*API).deleteModel),
		r(post, "/deployment/add", operator, (*API).upstreamCreateDeployment),
		r(get, "/deployment/all", viewer, (*API).upstreamAllDeployments),
		r(get, "/deployment/get/status/{deployment_id}", viewer, (*API).upstreamDeploymentStatus),
		r(post, "/deployment/add/operation", operator, (*API).recordOperation),
		r(get, "/deployment/get/opos/{ownerid}", viewer, (*API).upstreamOwnerOperations),
		r(del, "/deployment/{deployment_id}", operator, (*API).deleteDeployment),
		r(post, "/deployment/{deployment_id}/predict", operator, (*API).predict),
	}
}

// downloadsPrefix is where init containers fetch artifacts.
const downloadsPrefix = "/v1/downloads/"
