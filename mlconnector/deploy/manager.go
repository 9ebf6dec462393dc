// Package deploy runs model deployments: a deployment (a model version,
// placement, replicas, CPU, memory, GPUs, a serving runtime) becomes an
// MLSysOps application submitted through the northbound API and placed by
// the agents like any other. Its one component fetches the version's files
// in an init container (checking their SHA-256) and serves them with the
// runtime's image, ready once the model is loaded. The manager follows the
// application through the northbound API and tells the truth about it
// (Pending → Placing → Downloading → Loading → Ready, or Failed with the
// reason), moves a deployment to another version by a rolling update, and
// removes everything it created when the deployment is deleted.
//
// Work is level-triggered: the database records what each deployment
// should be (its generation) and what was submitted; a reconcile loop
// submits what is missing and observes the rest, so a connector restarted
// at any point neither loses nor duplicates a submission (submissions carry
// idempotency keys).
package deploy

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/db"
	"github.com/mlsysops-go/mlsysops/mlconnector/ops"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
	"github.com/mlsysops-go/mlsysops/mlconnector/runtimes"
	nbapi "github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/client"
)

// Endpoint access modes: how the connector reaches a deployment's model
// server to forward predictions.
const (
	// AccessExternal uses the NodePort on a node that runs the model
	// server (the connector runs outside the member clusters).
	AccessExternal = "external"
	// AccessService uses the Service's in-cluster URL (the connector runs
	// in the deployment's cluster).
	AccessService = "service"
	// AccessPod uses a ready pod's IP (the pod network is routed to the
	// connector).
	AccessPod = "pod"
)

// Options configure a Manager.
type Options struct {
	// ModelServerImage is the built-in runtime's image; FetchImage runs
	// the init container (default ModelServerImage).
	ModelServerImage string
	FetchImage       string
	// DownloadURL is the connector's base URL as pods reach it, for the
	// init container's downloads.
	DownloadURL string
	// Access says how predictions reach the model server (AccessExternal,
	// AccessService or AccessPod).
	Access string
	// ReconcileInterval is how often every deployment is submitted or
	// observed; default 2s.
	ReconcileInterval time.Duration
	// ForwardTimeout bounds one forwarded request; default 30s.
	ForwardTimeout time.Duration
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
}

// Northbound is what the manager asks of the northbound API; *NB (the Go
// client) implements it.
type Northbound interface {
	Submit(ctx context.Context, body []byte, idempotencyKey string) error
	Update(ctx context.Context, id string, body []byte, idempotencyKey string) error
	Remove(ctx context.Context, id string, idempotencyKey string) error
	Get(ctx context.Context, id string) (nbapi.Application, error)
}

// Manager runs deployments.
type Manager struct {
	pool *pgxpool.Pool
	reg  *registry.Registry
	rt   *runtimes.Registry
	nb   Northbound
	ops  *ops.Store
	key  []byte
	o    Options
	log  *slog.Logger
	hc   *http.Client
	meta sync.Map // deployment/version -> *modelMeta
	m    *metrics
}

// dialTimeout bounds one connection attempt to a model server (on the
// cluster's network, where connecting takes milliseconds).
const dialTimeout = 3 * time.Second

// New returns a manager. key signs download tokens (Key reads or makes the
// database's).
func New(pool *pgxpool.Pool, reg *registry.Registry, rt *runtimes.Registry, nb Northbound, log *ops.Store, key []byte, o Options) (*Manager, error) {
	if o.FetchImage == "" {
		o.FetchImage = o.ModelServerImage
	}
	if o.Access == "" {
		o.Access = AccessExternal
	}
	if o.ReconcileInterval <= 0 {
		o.ReconcileInterval = 2 * time.Second
	}
	if o.ForwardTimeout <= 0 {
		o.ForwardTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if len(key) < 32 {
		return nil, errors.New("deploy: the download key must have at least 32 bytes")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A replaced pod's address can swallow connection attempts (its
	// network is gone, its neighbour entry not yet): a short connect
	// limit lets forward try again at the address the status gives then
	// instead of spending the request's whole time on one attempt.
	tr.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.MaxIdleConnsPerHost = 256
	tr.ResponseHeaderTimeout = o.ForwardTimeout
	m := &Manager{pool: pool, reg: reg, rt: rt, nb: nb, ops: log, key: key, o: o,
		log: o.Logger.With("component", "deploy"), hc: &http.Client{Transport: tr}}
	var err error
	if m.m, err = newMetrics(o.Registerer); err != nil {
		return nil, err
	}
	return m, nil
}

// Key returns the database's download-token key, making it on first use,
// so that every replica of the connector, and a restarted one, signs the
// same tokens.
func Key(ctx context.Context, pool *pgxpool.Pool) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	var key []byte
	err := db.Retry(ctx, 10*time.Second, func(ctx context.Context) error {
		return pool.QueryRow(ctx, `WITH ins AS (INSERT INTO settings (name, value) VALUES ('download_key', $1) ON CONFLICT (name) DO NOTHING RETURNING value)
			SELECT value FROM ins UNION ALL SELECT value FROM settings WHERE name = 'download_key' LIMIT 1`, fresh).Scan(&key)
	})
	return key, err
}

// row is a deployment as stored.
type row struct {
	api.Deployment
	submitted int64
	deleting  bool
	observed  *time.Time
}

const rowColumns = `id, model_id, owner, spec, version, generation, submitted_generation, phase, reason, message, endpoint,
	pods, serving, deleting, created_by, created_at, updated_at, ready_at, observed_at`

func scanRow(r pgx.Row) (row, error) {
	var (
		d                        row
		spec, endpoint, pods, sv []byte
	)
	err := r.Scan(&d.DeploymentID, &d.ModelID, &d.OwnerID, &spec, &d.ModelVersion, &d.Generation, &d.submitted, &d.Phase, &d.Reason,
		&d.Message, &endpoint, &pods, &sv, &d.deleting, &d.CreatedBy, &d.CreatedAt, &d.UpdatedAt, &d.ReadyAt, &d.observed)
	if err != nil {
		return d, err
	}
	id, model, owner := d.DeploymentID, d.ModelID, d.OwnerID
	if err := json.Unmarshal(spec, &d.DeploymentSpec); err != nil {
		return d, fmt.Errorf("deployment %s: stored spec unreadable: %w", id, err)
	}
	d.DeploymentID, d.ModelID, d.OwnerID = id, model, owner
	if len(endpoint) > 0 && string(endpoint) != "null" {
		d.Endpoint = &api.Endpoint{}
		_ = json.Unmarshal(endpoint, d.Endpoint)
	}
	_ = json.Unmarshal(pods, &d.Pods)
	_ = json.Unmarshal(sv, &d.Serving)
	d.Status = d.Phase
	return d, nil
}

func (m *Manager) row(ctx context.Context, id string) (row, error) {
	var d row
	err := db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		var err error
		d, err = scanRow(m.pool.QueryRow(ctx, `SELECT `+rowColumns+` FROM deployments WHERE id = $1`, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return d, httpapi.NotFound("no deployment %q; list them with GET %s", id, api.PathDeployments)
	}
	return d, err
}

// invalidField is a 422 about one field of the request.
func invalidField(field, msg string) error {
	return httpapi.Invalid(msg, []api.Problem{{Field: field, Type: httpapi.FieldInvalid, Message: "Invalid value: " + msg}})
}

// resolve finds the version, the runtime and how it serves, for a request.
func (m *Manager) resolve(ctx context.Context, spec api.DeploymentSpec) (api.Model, api.Version, api.Runtime, error) {
	model, err := m.reg.Model(ctx, spec.ModelID)
	if errors.Is(err, registry.ErrNotFound) {
		return api.Model{}, api.Version{}, api.Runtime{}, invalidField("modelid", "no model "+spec.ModelID)
	}
	if err != nil {
		return api.Model{}, api.Version{}, api.Runtime{}, err
	}
	v, err := m.reg.Resolve(ctx, spec.ModelID, string(spec.Version))
	if errors.Is(err, registry.ErrNotFound) {
		return api.Model{}, api.Version{}, api.Runtime{}, invalidField("version", strings.TrimSuffix(err.Error(), ": "+registry.ErrNotFound.Error()))
	}
	if err != nil {
		return api.Model{}, api.Version{}, api.Runtime{}, err
	}
	var rt api.Runtime
	if spec.Runtime != "" {
		rt, err = m.rt.Get(ctx, spec.Runtime)
		if errors.Is(err, registry.ErrNotFound) {
			return api.Model{}, api.Version{}, api.Runtime{}, invalidField("runtime", "no runtime "+spec.Runtime+"; list them with GET "+api.PathRuntimes)
		}
	} else {
		rt, err = m.rt.ForFormat(ctx, v.Format)
	}
	if err != nil {
		return api.Model{}, api.Version{}, api.Runtime{}, err
	}
	return model, v, rt, nil
}

func servingOf(spec api.DeploymentSpec, v api.Version, rt api.Runtime) api.Serving {
	s := api.Serving{Runtime: rt.Name, Image: rt.Image, Port: rt.Port, Format: v.Format}
	if spec.Image != "" {
		s.Image = spec.Image
	}
	return s
}

// newID makes a deployment id: ml- and 10 random lower-case letters and
// digits.
func newID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "ml-" + string(b)
}

// Create records a deployment and submits its application.
func (m *Manager) Create(ctx context.Context, spec api.DeploymentSpec, by string) (api.Deployment, error) {
	_, v, rt, err := m.resolve(ctx, spec)
	if err != nil {
		return api.Deployment{}, err
	}
	if spec.DeploymentID == "" {
		spec.DeploymentID = newID()
	}
	id := spec.DeploymentID
	specJSON, _ := json.Marshal(spec)
	serving, _ := json.Marshal(servingOf(spec, v, rt))
	err = db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		_, err := m.pool.Exec(ctx, `INSERT INTO deployments (id, model_id, owner, spec, version, phase, message, serving, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, id, spec.ModelID, spec.OwnerID, specJSON, v.Version,
			api.PhasePending, "submitting the application to the northbound API", serving, by)
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return api.Deployment{}, httpapi.Conflict("deployment %q exists; choose another deployment_id, or change it with PATCH %s", id, api.DeploymentPath(id))
	}
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return api.Deployment{}, invalidField("modelid", "no model "+spec.ModelID)
	}
	if err != nil {
		return api.Deployment{}, fmt.Errorf("record deployment %s: %w", id, err)
	}
	m.log.Info("deployment created", "deployment", id, "model", spec.ModelID, "version", v.Version, "runtime", rt.Name, "user", by)
	m.m.deployments.WithLabelValues("created").Inc()
	m.reconcile(ctx, id)
	return m.Get(ctx, id)
}

// Get returns a deployment as last observed (observing it now when the
// last look is older than a second).
func (m *Manager) Get(ctx context.Context, id string) (api.Deployment, error) {
	if len(id) > api.MaxDeploymentIDLen || !api.CleanString(id) {
		return api.Deployment{}, httpapi.NotFound("no deployment %q", id)
	}
	d, err := m.row(ctx, id)
	if err != nil {
		return api.Deployment{}, err
	}
	if d.submitted > 0 && (d.observed == nil || time.Since(*d.observed) > time.Second) {
		m.reconcile(ctx, id)
		if d, err = m.row(ctx, id); err != nil {
			return api.Deployment{}, err
		}
	}
	return d.Deployment, nil
}

// List returns deployments ordered by id, filtered by owner and model, and
// the id to continue after.
func (m *Manager) List(ctx context.Context, owner, model, after string, limit int) ([]api.Deployment, string, error) {
	var out []api.Deployment
	err := db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		out = out[:0]
		rows, err := m.pool.Query(ctx, `SELECT `+rowColumns+` FROM deployments WHERE ($1 = '' OR owner = $1) AND ($2 = '' OR model_id = $2) AND id > $3
			ORDER BY id LIMIT $4`, owner, model, after, limit+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanRow(rows)
			if err != nil {
				return err
			}
			out = append(out, d.Deployment)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[len(out)-1].DeploymentID
	}
	return out, next, nil
}

// Update changes a deployment; another version rolls out without
// downtime (the old replicas serve until the new ones are ready).
func (m *Manager) Update(ctx context.Context, id string, spec api.DeploymentSpec, by string) (api.Deployment, error) {
	cur, err := m.row(ctx, id)
	if err != nil {
		return api.Deployment{}, err
	}
	if cur.deleting {
		return api.Deployment{}, httpapi.Conflict("deployment %s is being removed", id)
	}
	spec.DeploymentID, spec.ModelID, spec.OwnerID = cur.DeploymentID, cur.ModelID, cur.OwnerID
	_, v, rt, err := m.resolve(ctx, spec)
	if err != nil {
		return api.Deployment{}, err
	}
	specJSON, _ := json.Marshal(spec)
	serving, _ := json.Marshal(servingOf(spec, v, rt))
	var n int64
	err = db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		tag, err := m.pool.Exec(ctx, `UPDATE deployments SET spec = $2, version = $3, serving = $4, generation = generation + 1,
			updated_at = now() WHERE id = $1 AND NOT deleting`, id, specJSON, v.Version, serving)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return api.Deployment{}, err
	}
	if n == 0 {
		return api.Deployment{}, httpapi.Conflict("deployment %s is being removed", id)
	}
	m.log.Info("deployment changed", "deployment", id, "version", v.Version, "from_version", cur.ModelVersion, "user", by)
	m.reconcile(ctx, id)
	return m.Get(ctx, id)
}

// Delete starts removing a deployment: its application (workloads,
// Services, namespaces in the members) and then its row and operations.
func (m *Manager) Delete(ctx context.Context, id string) (api.Deployment, error) {
	if len(id) > api.MaxDeploymentIDLen || !api.CleanString(id) {
		return api.Deployment{}, httpapi.NotFound("no deployment %q", id)
	}
	if _, err := m.row(ctx, id); err != nil {
		return api.Deployment{}, err
	}
	err := db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		_, err := m.pool.Exec(ctx, `UPDATE deployments SET deleting = true, phase = $2, reason = '', message = $3, updated_at = now() WHERE id = $1`,
			id, api.PhaseDeleting, "removing the application and everything it created")
		return err
	})
	if err != nil {
		return api.Deployment{}, err
	}
	m.log.Info("deployment deletion started", "deployment", id)
	m.reconcile(ctx, id)
	d, err := m.row(ctx, id)
	var he *httpapi.Error
	if errors.As(err, &he) && he.Status == http.StatusNotFound {
		return api.Deployment{DeploymentSpec: api.DeploymentSpec{DeploymentID: id}, Phase: api.PhaseDeleting, Status: api.PhaseDeleting,
			Message: "removed"}, nil
	}
	return d.Deployment, err
}

// Authorize checks an init container's download token and returns the
// model the file belongs to.
func (m *Manager) Authorize(ctx context.Context, deploymentID, fileID, token string) (string, error) {
	if len(deploymentID) > api.MaxDeploymentIDLen || !api.CleanString(deploymentID) || len(fileID) > 64 || !api.CleanString(fileID) {
		return "", httpapi.NotFound("no such download")
	}
	want := DownloadToken(m.key, deploymentID, fileID)
	if subtle.ConstantTimeCompare([]byte(want), []byte(token)) != 1 {
		return "", httpapi.NewError(http.StatusForbidden, httpapi.ProblemForbidden, "the download token does not match this deployment and file")
	}
	d, err := m.row(ctx, deploymentID)
	if err != nil {
		return "", err
	}
	if _, err := m.reg.Artifact(ctx, d.ModelID, fileID); err != nil {
		return "", err
	}
	m.m.downloads.Inc()
	return d.ModelID, nil
}

// Run reconciles every deployment every interval until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.o.ReconcileInterval)
	defer t.Stop()
	for {
		var ids []string
		err := db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
			rows, err := m.pool.Query(ctx, `SELECT id FROM deployments ORDER BY id`)
			if err != nil {
				return err
			}
			ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err != nil && ctx.Err() == nil {
			m.log.Warn("deployments not read; retrying at the next tick", "err", err)
		}
		for _, id := range ids {
			if ctx.Err() != nil {
				return
			}
			m.reconcile(ctx, id)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reconcile brings one deployment a step closer to what it should be:
// submit what was not submitted, remove what is being deleted, observe the
// rest. Failures are recorded on the deployment or retried next time.
func (m *Manager) reconcile(ctx context.Context, id string) {
	d, err := m.row(ctx, id)
	if err != nil {
		return
	}
	switch {
	case d.deleting:
		m.remove(ctx, d)
	case d.submitted < d.Generation:
		m.submit(ctx, d)
	default:
		m.observe(ctx, d)
	}
}

func (m *Manager) submit(ctx context.Context, d row) {
	model, err := m.reg.Model(ctx, d.ModelID)
	if err != nil {
		m.setState(ctx, d, observed{Phase: d.Phase, Reason: d.Reason, Message: "cannot read the model: " + err.Error()})
		return
	}
	v, err := m.reg.Resolve(ctx, d.ModelID, strconv.Itoa(d.ModelVersion))
	if err != nil {
		m.setState(ctx, d, observed{Phase: api.PhaseFailed, Reason: api.ReasonArtifactMissing, Message: "the version is gone: " + err.Error()})
		return
	}
	var data *api.Artifact
	if a, err := m.reg.LatestArtifact(ctx, d.ModelID, api.FileData); err == nil {
		data = &a
	}
	rt, err := m.rt.Get(ctx, d.Serving.Runtime)
	if err != nil {
		m.setState(ctx, d, observed{Phase: api.PhaseFailed, Reason: api.ReasonImageCannotRun, Message: "the runtime is gone: " + err.Error()})
		return
	}
	app, err := buildApp(buildInput{ID: d.DeploymentID, Spec: d.DeploymentSpec, Model: model, Version: v, Data: data, Runtime: rt,
		FetchImage: m.o.FetchImage, DownloadURL: m.o.DownloadURL, Key: m.key})
	if err != nil {
		m.setState(ctx, d, observed{Phase: api.PhaseFailed, Reason: api.ReasonSubmitFailed, Message: err.Error()})
		return
	}
	body, err := json.Marshal(app)
	if err != nil {
		return
	}
	key := fmt.Sprintf("mlc-%s-g%d", d.DeploymentID, d.Generation)
	if d.submitted == 0 {
		err = m.nb.Submit(ctx, body, key)
	} else {
		err = m.nb.Update(ctx, d.DeploymentID, body, key)
	}
	if err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.StatusCode/100 == 4 && ce.StatusCode != http.StatusTooManyRequests {
			m.setState(ctx, d, observed{Phase: api.PhaseFailed, Reason: api.ReasonSubmitFailed,
				Message: "the northbound API refused the application: " + problemText(ce.Problem)})
			m.log.Warn("application refused", "deployment", d.DeploymentID, "status", ce.StatusCode, "detail", ce.Problem.Detail)
			return
		}
		m.setState(ctx, d, observed{Phase: d.Phase, Reason: d.Reason, Message: "the northbound API cannot be reached; retrying: " + err.Error()})
		return
	}
	_ = db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		_, err := m.pool.Exec(ctx, `UPDATE deployments SET submitted_generation = $2, updated_at = now() WHERE id = $1 AND submitted_generation < $2`,
			d.DeploymentID, d.Generation)
		return err
	})
	m.log.Info("application submitted", "deployment", d.DeploymentID, "generation", d.Generation, "version", v.Version)
	d.submitted = d.Generation
	m.observe(ctx, d)
}

func problemText(p nbapi.Problem) string {
	s := p.Detail
	for _, fp := range p.Problems {
		s += "; " + fp.Field + ": " + fp.Message
	}
	return s
}

func (m *Manager) observe(ctx context.Context, d row) {
	app, err := m.nb.Get(ctx, d.DeploymentID)
	if client.IsNotFound(err) {
		// The application is gone though the deployment is not: someone
		// removed it. Submit it again.
		m.log.Warn("application gone; submitting it again", "deployment", d.DeploymentID)
		_, _ = m.pool.Exec(ctx, `UPDATE deployments SET submitted_generation = 0 WHERE id = $1`, d.DeploymentID)
		return
	}
	if err != nil {
		return
	}
	o := observe(&app, d.ModelVersion)
	m.setState(ctx, d, o)
}

func (m *Manager) remove(ctx context.Context, d row) {
	// The northbound API is asked even when no submission is recorded:
	// the database may have been down between a submission the API
	// accepted and its record (submit ignores a failed record), and the
	// application would be left running with nothing to remove it.
	app, err := m.nb.Get(ctx, d.DeploymentID)
	switch {
	case client.IsNotFound(err):
	case err != nil:
		return
	default:
		if app.Phase != string(mlsysopsv1.AppRemoving) {
			if err := m.nb.Remove(ctx, d.DeploymentID, "mlc-"+d.DeploymentID+"-remove"); err != nil && !client.IsNotFound(err) {
				m.log.Warn("removal not queued; retrying", "deployment", d.DeploymentID, "err", err)
			}
		}
		return
	}
	// Gone from the northbound API (and from Karmada and the members):
	// forget the deployment and its operations.
	err = db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		_, err := m.pool.Exec(ctx, `DELETE FROM deployments WHERE id = $1 AND deleting`, d.DeploymentID)
		return err
	})
	if err == nil {
		m.meta.Range(func(k, _ any) bool {
			if strings.HasPrefix(k.(string), d.DeploymentID+"/") {
				m.meta.Delete(k)
			}
			return true
		})
		m.log.Info("deployment removed", "deployment", d.DeploymentID)
		m.m.deployments.WithLabelValues("removed").Inc()
	}
}

// setState records an observation; a phase change is logged.
func (m *Manager) setState(ctx context.Context, d row, o observed) {
	endpoint, _ := json.Marshal(o.Endpoint)
	if o.Endpoint == nil {
		endpoint = []byte("null")
	}
	pods, _ := json.Marshal(o.Pods)
	if o.Pods == nil {
		pods = []byte("[]")
	}
	err := db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		_, err := m.pool.Exec(ctx, `UPDATE deployments SET phase = $2, reason = $3, message = $4, endpoint = $5, pods = $6, observed_at = now(),
			ready_at = CASE WHEN $2 = 'Ready' AND ready_at IS NULL THEN now() ELSE ready_at END,
			updated_at = CASE WHEN phase <> $2 OR reason <> $3 THEN now() ELSE updated_at END
			WHERE id = $1 AND NOT deleting`, d.DeploymentID, o.Phase, o.Reason, o.Message, endpoint, pods)
		return err
	})
	if err != nil {
		return
	}
	if o.Phase != d.Phase || o.Reason != d.Reason {
		m.log.Info("deployment phase", "deployment", d.DeploymentID, "phase", o.Phase, "from", d.Phase, "reason", o.Reason, "message", o.Message)
		m.m.phases.WithLabelValues(o.Phase).Inc()
	}
}

// NB is the northbound API's Go client as the manager uses it.
type NB struct{ C *client.Client }

var _ Northbound = NB{}

// Submit implements Northbound.
func (n NB) Submit(ctx context.Context, body []byte, key string) error {
	_, err := n.C.MLDeployments().Submit(ctx, body, client.JSON, client.WithIdempotencyKey(key))
	return err
}

// Update implements Northbound.
func (n NB) Update(ctx context.Context, id string, body []byte, key string) error {
	_, err := n.C.MLDeployments().Update(ctx, id, body, client.JSON, client.WithIdempotencyKey(key))
	return err
}

// Remove implements Northbound.
func (n NB) Remove(ctx context.Context, id string, key string) error {
	_, err := n.C.MLDeployments().Remove(ctx, id, client.WithIdempotencyKey(key))
	return err
}

// Get implements Northbound.
func (n NB) Get(ctx context.Context, id string) (nbapi.Application, error) {
	return n.C.MLDeployments().Get(ctx, id)
}

// Ready checks the northbound API for /readyz.
func (n NB) Ready(ctx context.Context) error {
	_, err := n.C.Readyz(ctx)
	return err
}
