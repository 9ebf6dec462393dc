// Package handlers is the HTTP side of the MLSysOps northbound API: the
// chi router, its middleware (request ids, access logs, per-route
// Prometheus metrics, timeouts, panic recovery, bearer-token
// authentication and roles), the handlers of the versioned resources under
// /v1 and of the upstream-compatible paths, and the OpenAPI document with
// its HTML rendering.
//
// Submissions are validated by internal/description and queued atomically
// with their status by internal/state; live status is read from the
// MLSysOpsApp resources in Karmada (northbound/infra). Every client mistake
// is a 4xx problem document listing every problem with its field path;
// failures of Redis, Karmada or XMPP are 503 (504 on a timeout); a 500
// means a bug.
package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/placement"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/infra"
	"github.com/mlsysops-go/mlsysops/northbound/policystore"
)

// Infra is what the API reads and writes in Karmada; *infra.Karmada
// implements it.
type Infra interface {
	App(ctx context.Context, name string) (*mlsysopsv1.MLSysOpsApp, error)
	Clusters(ctx context.Context) ([]infra.ClusterState, error)
	Cluster(ctx context.Context, name string) (infra.ClusterState, error)
	ClusterNodes(ctx context.Context, cluster string) ([]placement.Node, error)
	AppPods(ctx context.Context, cluster, app string) ([]corev1.Pod, error)
	AppServices(ctx context.Context, cluster, app string) ([]corev1.Service, error)
	NodeDescriptions(ctx context.Context) ([]mlsysopsv1.MLSysOpsNode, error)
	ClusterExists(ctx context.Context, name string) (bool, error)
	RegisterNode(ctx context.Context, node *mlsysopsv1.MLSysOpsNode) (bool, error)
	UnregisterNode(ctx context.Context, name string) error
}

var _ Infra = (*infra.Karmada)(nil)

// Messenger talks to agents over XMPP; *messaging.Client implements it.
type Messenger interface {
	Request(ctx context.Context, to string, msg messaging.Message) (messaging.Message, *messaging.Envelope, error)
	Send(ctx context.Context, to string, msg messaging.Message) error
}

var _ Messenger = (*messaging.Client)(nil)

// Config is what the API needs. Store and Auth are required; without
// Infra, Messenger or Policies the routes that need them answer 503.
type Config struct {
	// Store is the shared state in Redis.
	Store *state.Store
	// Auth checks bearer tokens.
	Auth *auth.Authenticator
	// Infra reads and writes the Karmada API.
	Infra Infra
	// Messenger pings agents and switches their mode.
	Messenger Messenger
	// Policies keeps the agents' policy files.
	Policies policystore.Store
	// PublicPaths are served without a token; a path ending in / covers
	// everything below it. Default /healthz, /readyz, /metrics.
	PublicPaths []string
	// ContinuumID is reported as the continuum's id.
	ContinuumID string
	// ContinuumJID is pinged by GET /manage/ping when no continuum agent is
	// registered.
	ContinuumJID string
	// MaxBodyBytes bounds request bodies; default 4 MiB (the largest
	// description the validator reads).
	MaxBodyBytes int64
	// RequestTimeout bounds one request; default 30s.
	RequestTimeout time.Duration
	// PingTimeout bounds one round trip to an agent; default 10s.
	PingTimeout time.Duration
	// Logger receives access logs and errors; default slog.Default().
	Logger *slog.Logger
	// Registerer receives the request metrics; Gatherer serves /metrics.
	// Default: a private registry with the Go and process collectors.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Version is reported by /healthz.
	Version string
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes   = 4 << 20
	DefaultRequestTimeout = httpapi.DefaultRequestTimeout
	DefaultPingTimeout    = 10 * time.Second
)

// DefaultPublicPaths are served without a token by default.
var DefaultPublicPaths = httpapi.DefaultPublicPaths

// API is the northbound HTTP handler.
type API struct {
	cfg Config
	log *slog.Logger
	srv *httpapi.Server
}

var _ http.Handler = (*API)(nil)

// New builds the API.
func New(cfg Config) (*API, error) {
	if cfg.Store == nil {
		return nil, errors.New("northbound: a state store is required")
	}
	if cfg.Auth == nil {
		return nil, errors.New("northbound: an authenticator is required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = DefaultPingTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &API{cfg: cfg}
	var routes []httpapi.Route
	for _, rt := range routeTable() {
		h := rt.handle
		routes = append(routes, httpapi.Route{
			Method: rt.Method, Pattern: rt.Pattern, Role: rt.Role,
			Handle: func(w http.ResponseWriter, r *http.Request) error { return h(a, w, r) },
		})
	}
	srv, err := httpapi.New(httpapi.Config{
		Name: "northbound", Auth: cfg.Auth, PublicPaths: cfg.PublicPaths, RequestTimeout: cfg.RequestTimeout,
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

// Router returns the chi router, for walking its routes.
func (a *API) Router() chi.Routes { return a.srv.Router() }

// Routes returns the route table, the built-in routes of internal/httpapi
// included.
func (a *API) Routes() []httpapi.Route { return a.srv.Routes() }

// OpenAPI returns the OpenAPI document (JSON).
func (a *API) OpenAPI() []byte { return a.srv.OpenAPI() }

// Server returns the shared HTTP machinery.
func (a *API) Server() *httpapi.Server { return a.srv }

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) { a.srv.Fail(w, r, err) }

// routeDef is one route of the API, bound to the API when it is built.
type routeDef struct {
	Method  string
	Pattern string
	// Role is the least role allowed to call it.
	Role   api.Role
	handle func(a *API, w http.ResponseWriter, r *http.Request) error
}

func route(method, pattern string, role api.Role, h func(a *API, w http.ResponseWriter, r *http.Request) error) routeDef {
	return routeDef{Method: method, Pattern: pattern, Role: role, handle: h}
}

// routeTable is the route table (internal/httpapi adds /healthz,
// /readyz, /metrics, /openapi.json and /docs); the OpenAPI document must describe exactly
// these (TestOpenAPIMatchesRoutes).
func routeTable() []routeDef {
	const (
		get, post, put, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete
		viewer, operator    = api.RoleViewer, api.RoleOperator
	)
	apps, ml := appsCollection, mlCollection
	return []routeDef{
		route(post, api.PathApplications, operator, apps.submit),
		route(get, api.PathApplications, viewer, apps.list),
		route(get, api.PathApplications+"/{id}", viewer, apps.get),
		route(put, api.PathApplications+"/{id}", operator, apps.update),
		route(del, api.PathApplications+"/{id}", operator, apps.remove),
		route(get, api.PathApplications+"/{id}/performance", viewer, apps.performance),

		route(post, api.PathMLDeployments, operator, ml.submit),
		route(get, api.PathMLDeployments, viewer, ml.list),
		route(get, api.PathMLDeployments+"/{id}", viewer, ml.get),
		route(put, api.PathMLDeployments+"/{id}", operator, ml.update),
		route(del, api.PathMLDeployments+"/{id}", operator, ml.remove),
		route(get, api.PathMLDeployments+"/{id}/performance", viewer, ml.performance),

		route(get, api.PathInfrastructure, viewer, (*API).continuum),
		route(get, api.PathClusters, viewer, (*API).listClusters),
		route(get, api.PathClusters+"/{name}", viewer, (*API).getCluster),
		route(get, api.PathNodes, viewer, (*API).listNodes),
		route(post, api.PathNodes, operator, (*API).registerNode),
		route(get, api.PathNodes+"/{name}", viewer, (*API).getNode),
		route(put, api.PathNodes+"/{name}", operator, (*API).replaceNode),
		route(del, api.PathNodes+"/{name}", operator, (*API).unregisterNode),

		route(get, api.PathAgents, viewer, (*API).listAgents),
		route(put, api.PathAgentsMode, operator, (*API).setModeAll),
		route(get, api.PathAgents+"/{jid}", viewer, (*API).getAgent),
		route(post, api.PathAgents+"/{jid}/ping", viewer, (*API).pingAgent),
		route(put, api.PathAgents+"/{jid}/mode", operator, (*API).setModeOne),

		route(get, api.PathPolicies, viewer, (*API).listPolicies),
		route(get, api.PathPolicies+"/{layer}/{name}", viewer, (*API).getPolicy),
		route(put, api.PathPolicies+"/{layer}/{name}", operator, (*API).putPolicy),
		route(del, api.PathPolicies+"/{layer}/{name}", operator, (*API).deletePolicy),

		// Upstream paths, with upstream bodies.
		route(post, "/apps/deploy", operator, (*API).upstreamDeploy),
		route(get, "/apps/list_all", viewer, apps.upstreamListAll),
		route(get, "/apps/list_all/", viewer, apps.upstreamListAll),
		route(get, "/apps/status/{app_id}", viewer, (*API).upstreamAppStatus),
		route(get, "/apps/apps/details/{app_id}", viewer, (*API).upstreamAppDetails),
		route(get, "/apps/details/{app_id}", viewer, (*API).upstreamAppDetails),
		route(get, "/apps/performance/{app_id}", viewer, (*API).upstreamAppPerformance),
		route(del, "/apps/remove/{app_id}", operator, (*API).upstreamAppRemove),
		route(post, "/ml/deploy_ml", operator, (*API).upstreamDeployML),
		route(get, "/ml/list_all", viewer, ml.upstreamListAll),
		route(get, "/ml/list_all/", viewer, ml.upstreamListAll),
		route(get, "/ml/status/{model_uid}", viewer, (*API).upstreamMLStatus),
		route(del, "/ml/remove/{model_uid}", operator, (*API).upstreamMLRemove),
		route(post, "/infra/register", operator, (*API).upstreamRegister),
		route(get, "/infra/list", viewer, (*API).upstreamInfraList),
		route(get, "/infra/list/", viewer, (*API).upstreamInfraList),
		route(get, "/manage/ping", viewer, (*API).upstreamPing),
		route(put, "/manage/mode/{mode}", operator, (*API).upstreamMode),
	}
}

// ready says whether the API can do its work: Redis answers.
func (a *API) ready(ctx context.Context) map[string]error {
	return map[string]error{"redis": a.cfg.Store.Client().Ping(ctx).Err()}
}
