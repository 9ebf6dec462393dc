// Package registry is the ML connector's model registry: models with
// upstream's metadata, their numbered versions (one per uploaded model
// file) and aliases, and their artifacts, whose metadata and SHA-256
// checksums live in PostgreSQL and whose bytes live in an object store.
//
// Deleting a model deletes its artifacts. The objects to delete are
// queued in the transaction that forgets their rows and removed once the
// store confirms, so a store that is down loses nothing and leaks
// nothing; a sweeper retries the queue and collects objects no row knows
// (an upload cut short by a crash).
package registry

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/db"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
)

// ErrNotFound is returned for a model, version, alias or artifact that
// does not exist.
var ErrNotFound = errors.New("not found")

// InUseError refuses to delete a model that deployments still use.
type InUseError struct {
	Model       string
	Deployments []string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("model %s is used by deployment(s) %s; delete them first", e.Model, strings.Join(e.Deployments, ", "))
}

// FormatError refuses a model file whose format cannot be told.
type FormatError struct{ FileName string }

func (e *FormatError) Error() string {
	return fmt.Sprintf("cannot tell the format of model file %q from its name or content; send format (%s) with the upload or set the model's format",
		e.FileName, strings.Join(api.ModelFormats, ", "))
}

// Options tune a Registry.
type Options struct {
	// RetryWait is how long an operation retries while the database is
	// unavailable before giving up with db.ErrUnavailable; default 5s.
	RetryWait time.Duration
	Logger    *slog.Logger
}

// Registry keeps models and their artifacts.
type Registry struct {
	pool    *pgxpool.Pool
	objects objstore.Store
	log     *slog.Logger
	wait    time.Duration
}

// New returns a registry on a migrated database and an object store.
func New(pool *pgxpool.Pool, objects objstore.Store, o Options) *Registry {
	if o.RetryWait <= 0 {
		o.RetryWait = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Registry{pool: pool, objects: objects, log: o.Logger.With("component", "registry"), wait: o.RetryWait}
}

// Objects returns the artifact store.
func (r *Registry) Objects() objstore.Store { return r.objects }

// Pool returns the database pool.
func (r *Registry) Pool() *pgxpool.Pool { return r.pool }

func (r *Registry) retry(ctx context.Context, fn func(ctx context.Context) error) error {
	return db.Retry(ctx, r.wait, fn)
}

// modelColumns are read by scanModel, in this order.
const modelColumns = `m.id, m.name, m.kind, m.format, m.owner, m.tags, m.hyperparameters, m.performance,
	m.training_resources, m.run_resources, m.features, m.inference, m.drift, m.created_at, m.updated_at,
	COALESCE((SELECT max(v.version) FROM model_versions v WHERE v.model_id = m.id), 0),
	COALESCE((SELECT jsonb_object_agg(a.alias, a.version) FROM model_aliases a WHERE a.model_id = m.id), '{}'::jsonb)`

func scanModel(row pgx.Row) (api.Model, error) {
	var (
		m                                                     api.Model
		hyper, perf, train, run, feats, infer, drift, aliases []byte
	)
	err := row.Scan(&m.ModelID, &m.ModelName, &m.ModelKind, &m.Format, &m.Owner, &m.ModelTags, &hyper, &perf,
		&train, &run, &feats, &infer, &drift, &m.CreatedAt, &m.UpdatedAt, &m.LatestVersion, &aliases)
	if err != nil {
		return api.Model{}, err
	}
	for _, f := range []struct {
		b []byte
		v any
	}{{hyper, &m.Hyperparameter}, {perf, &m.ModelPerformance}, {train, &m.TrainingResource}, {run, &m.RunResource},
		{feats, &m.FeatureList}, {infer, &m.Inference}, {drift, &m.DriftDetection}, {aliases, &m.Aliases}} {
		if err := json.Unmarshal(f.b, f.v); err != nil {
			return api.Model{}, fmt.Errorf("model %s: stored metadata unreadable: %w", m.ModelID, err)
		}
	}
	if len(m.Aliases) == 0 {
		m.Aliases = nil
	}
	return m, nil
}

// specArgs returns the JSON columns of a spec, never null.
func specArgs(s *api.ModelSpec) ([]any, error) {
	var out []any
	for _, v := range []any{s.Hyperparameter, s.ModelPerformance, s.TrainingResource, s.RunResource, s.FeatureList, s.Inference, s.DriftDetection} {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if string(b) == "null" {
			b = []byte("[]")
		}
		out = append(out, b)
	}
	return out, nil
}

func tags(s *api.ModelSpec) []string {
	if s.ModelTags == nil {
		return []string{}
	}
	return s.ModelTags
}

// CreateModel registers a model described by spec (already validated).
func (r *Registry) CreateModel(ctx context.Context, spec api.ModelSpec, by string) (api.Model, error) {
	id := uuid.NewString()
	js, err := specArgs(&spec)
	if err != nil {
		return api.Model{}, err
	}
	var m api.Model
	err = r.retry(ctx, func(ctx context.Context) error {
		args := append([]any{id, spec.ModelName, spec.ModelKind, spec.Format, by, tags(&spec)}, js...)
		_, err := r.pool.Exec(ctx, `INSERT INTO models (id, name, kind, format, owner, tags, hyperparameters, performance,
			training_resources, run_resources, features, inference, drift, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $5)
			ON CONFLICT (id) DO NOTHING`, args...)
		if err != nil {
			return err
		}
		m, err = r.model(ctx, r.pool, id)
		return err
	})
	if err != nil {
		return api.Model{}, fmt.Errorf("register model %s: %w", spec.ModelName, err)
	}
	r.log.Info("model registered", "model", id, "name", spec.ModelName, "kind", spec.ModelKind, "user", by)
	return m, nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (r *Registry) model(ctx context.Context, q querier, id string) (api.Model, error) {
	m, err := scanModel(q.QueryRow(ctx, `SELECT `+modelColumns+` FROM models m WHERE m.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Model{}, fmt.Errorf("model %s: %w", id, ErrNotFound)
	}
	return m, err
}

// Model returns one model.
func (r *Registry) Model(ctx context.Context, id string) (api.Model, error) {
	if _, err := uuid.Parse(id); err != nil {
		return api.Model{}, fmt.Errorf("model %s: %w", id, ErrNotFound)
	}
	var m api.Model
	err := r.retry(ctx, func(ctx context.Context) error {
		var err error
		m, err = r.model(ctx, r.pool, id)
		return err
	})
	return m, err
}

// ListOptions filter and page a model list.
type ListOptions struct {
	// Kind keeps models of this kind.
	Kind string
	// Tags keeps models with at least one of these tags.
	Tags []string
	// Name keeps models with this name.
	Name string
	// After is the id of the last model of the previous page.
	After string
	// Limit is the page size.
	Limit int
}

// Models returns a page of models ordered by id, and the id to continue
// after ("" on the last page).
func (r *Registry) Models(ctx context.Context, o ListOptions) ([]api.Model, string, error) {
	if o.Limit <= 0 {
		o.Limit = 100
	}
	var out []api.Model
	err := r.retry(ctx, func(ctx context.Context) error {
		out = out[:0]
		// Only the filters given, so that the plan uses their indexes;
		// the page is cut before the versions and aliases are looked up.
		where, args := []string{"id > $1"}, []any{o.After}
		if o.Kind != "" {
			args = append(args, o.Kind)
			where = append(where, fmt.Sprintf("kind = $%d", len(args)))
		}
		if len(o.Tags) > 0 {
			args = append(args, o.Tags)
			where = append(where, fmt.Sprintf("tags && $%d::text[]", len(args)))
		}
		if o.Name != "" {
			args = append(args, o.Name)
			where = append(where, fmt.Sprintf("name = $%d", len(args)))
		}
		args = append(args, o.Limit+1)
		rows, err := r.pool.Query(ctx, `SELECT `+modelColumns+` FROM (SELECT * FROM models WHERE `+strings.Join(where, " AND ")+
			fmt.Sprintf(` ORDER BY id LIMIT $%d) m ORDER BY m.id`, len(args)), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			m, err := scanModel(rows)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, "", fmt.Errorf("list models: %w", err)
	}
	next := ""
	if len(out) > o.Limit {
		out = out[:o.Limit]
		next = out[len(out)-1].ModelID
	}
	return out, next, nil
}

// ReplaceSpec replaces a model's description (a PATCH merged into the
// current one, validated by the caller). It fails with ErrNotFound for an
// unknown model and with a *ConflictError when the model changed since
// version (its updated_at) was read.
func (r *Registry) ReplaceSpec(ctx context.Context, id string, spec api.ModelSpec, readAt time.Time) (api.Model, error) {
	js, err := specArgs(&spec)
	if err != nil {
		return api.Model{}, err
	}
	var m api.Model
	err = r.retry(ctx, func(ctx context.Context) error {
		args := append([]any{id, spec.ModelName, spec.ModelKind, spec.Format, tags(&spec), readAt}, js...)
		tag, err := r.pool.Exec(ctx, `UPDATE models SET name = $2, kind = $3, format = $4, tags = $5,
			hyperparameters = $7, performance = $8, training_resources = $9, run_resources = $10,
			features = $11, inference = $12, drift = $13, updated_at = clock_timestamp()
			WHERE id = $1 AND updated_at = $6`, args...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			if _, err := r.model(ctx, r.pool, id); err != nil {
				return err
			}
			return &ConflictError{What: "model " + id, Detail: "it was changed by another request meanwhile; read it again and retry"}
		}
		m, err = r.model(ctx, r.pool, id)
		return err
	})
	return m, err
}

// ConflictError is a change refused because of the current state.
type ConflictError struct{ What, Detail string }

func (e *ConflictError) Error() string { return e.What + ": " + e.Detail }

// DeleteModel forgets a model, its versions, aliases, artifacts and drift
// results, and deletes its objects from the store. A model that
// deployments use is refused with *InUseError.
func (r *Registry) DeleteModel(ctx context.Context, id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return fmt.Errorf("model %s: %w", id, ErrNotFound)
	}
	var keys []string
	err := r.retry(ctx, func(ctx context.Context) error {
		keys = keys[:0]
		return db.InTx(ctx, r.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM models WHERE id = $1 FOR UPDATE`, id); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT id FROM deployments WHERE model_id = $1 ORDER BY id`, id)
			if err != nil {
				return err
			}
			deps, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			if len(deps) > 0 {
				return &InUseError{Model: id, Deployments: deps}
			}
			rows, err = tx.Query(ctx, `SELECT object_key FROM artifacts WHERE model_id = $1`, id)
			if err != nil {
				return err
			}
			if keys, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO object_deletions (object_key) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, keys); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `DELETE FROM models WHERE id = $1`, id)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("model %s: %w", id, ErrNotFound)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	r.log.Info("model deleted", "model", id, "artifacts", len(keys))
	// The objects go now if the store answers; else the sweeper retries.
	if _, err := r.SweepDeletions(ctx, keys); err != nil {
		r.log.Warn("artifacts of a deleted model not removed yet; the sweeper retries", "model", id, "err", err)
	}
	return nil
}

// UploadRequest is one file to add to a model.
type UploadRequest struct {
	ModelID string
	// Kind is model, data, code or env.
	Kind string
	// FileName is the client's name of the file, already sanitised.
	FileName    string
	ContentType string
	// Format of a model file; found from the model, then the file, when
	// empty.
	Format string
	// Body holds Size bytes.
	Body io.Reader
	Size int64
	By   string
}

// Upload stores a file of a model and records it with its checksum. A
// model file makes a new version. The object is written before the row,
// so a row always has its object; an object whose row could not be
// written is deleted, or collected later.
func (r *Registry) Upload(ctx context.Context, req UploadRequest) (api.Uploaded, error) {
	m, err := r.Model(ctx, req.ModelID)
	if err != nil {
		return api.Uploaded{}, err
	}
	br := bufio.NewReaderSize(req.Body, 4096)
	head, _ := br.Peek(4096)
	format := ""
	if req.Kind == api.FileModel {
		format = firstNonEmpty(req.Format, m.Format, api.DetectFormat(req.FileName, head))
		if format == "" {
			return api.Uploaded{}, &FormatError{FileName: req.FileName}
		}
	}
	id := uuid.NewString()
	key := "models/" + req.ModelID + "/" + id
	h := sha256.New()
	counted := &countingReader{r: io.TeeReader(br, h)}
	if err := r.objects.Put(ctx, key, counted, req.Size, req.ContentType); err != nil {
		return api.Uploaded{}, fmt.Errorf("store %s file of model %s: %w", req.Kind, req.ModelID, err)
	}
	if req.Size >= 0 && counted.n != req.Size {
		r.dropObject(ctx, key)
		return api.Uploaded{}, fmt.Errorf("store %s file of model %s: read %d bytes of %d", req.Kind, req.ModelID, counted.n, req.Size)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	var out api.Uploaded
	err = r.retry(ctx, func(ctx context.Context) error {
		return db.InTx(ctx, r.pool, func(tx pgx.Tx) error {
			// The lock orders concurrent uploads of one model.
			if _, err := r.model(ctx, tx, req.ModelID); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `SELECT 1 FROM models WHERE id = $1 FOR UPDATE`, req.ModelID); err != nil {
				return err
			}
			var rev int
			if err := tx.QueryRow(ctx, `SELECT COALESCE(max(revision), 0) + 1 FROM artifacts WHERE model_id = $1 AND kind = $2`,
				req.ModelID, req.Kind).Scan(&rev); err != nil {
				return err
			}
			a := api.Artifact{ID: id, ModelID: req.ModelID, Kind: req.Kind, Revision: rev, FileName: req.FileName,
				ContentType: req.ContentType, Size: counted.n, SHA256: sum, CreatedBy: req.By}
			if err := tx.QueryRow(ctx, `INSERT INTO artifacts (id, model_id, kind, revision, file_name, content_type, size_bytes, sha256, object_key, created_by)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING created_at`,
				a.ID, a.ModelID, a.Kind, a.Revision, a.FileName, a.ContentType, a.Size, a.SHA256, key, a.CreatedBy).Scan(&a.CreatedAt); err != nil {
				return err
			}
			out = api.Uploaded{Artifact: a}
			if req.Kind != api.FileModel {
				return nil
			}
			v := api.Version{ModelID: req.ModelID, Version: rev, Format: format, Artifact: a, CreatedBy: req.By}
			if err := tx.QueryRow(ctx, `INSERT INTO model_versions (model_id, version, artifact_id, format, created_by)
				VALUES ($1, $2, $3, $4, $5) RETURNING created_at`, v.ModelID, v.Version, a.ID, v.Format, v.CreatedBy).Scan(&v.CreatedAt); err != nil {
				return err
			}
			if m.Format == "" {
				if _, err := tx.Exec(ctx, `UPDATE models SET format = $2 WHERE id = $1 AND format = ''`, req.ModelID, format); err != nil {
					return err
				}
			}
			out.Version = &v
			return nil
		})
	})
	if err != nil {
		r.dropObject(ctx, key)
		return api.Uploaded{}, fmt.Errorf("record %s file of model %s: %w", req.Kind, req.ModelID, err)
	}
	attrs := []any{"model", req.ModelID, "kind", req.Kind, "revision", out.Revision, "size", out.Size, "sha256", sum, "user", req.By}
	if out.Version != nil {
		attrs = append(attrs, "version", out.Version.Version, "format", format)
	}
	r.log.Info("artifact stored", attrs...)
	return out, nil
}

// dropObject deletes an object whose row was not written; when the store
// refuses, the orphan collection removes it later.
func (r *Registry) dropObject(ctx context.Context, key string) {
	if err := r.objects.Delete(context.WithoutCancel(ctx), key); err != nil {
		r.log.Warn("object without a row not deleted; the sweeper collects it", "key", key, "err", err)
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

const artifactColumns = `a.id, a.model_id, a.kind, a.revision, a.file_name, a.content_type, a.size_bytes, a.sha256, a.created_by, a.created_at`

func scanArtifact(row pgx.Row, extra ...any) (api.Artifact, error) {
	var a api.Artifact
	err := row.Scan(append([]any{&a.ID, &a.ModelID, &a.Kind, &a.Revision, &a.FileName, &a.ContentType, &a.Size, &a.SHA256, &a.CreatedBy, &a.CreatedAt}, extra...)...)
	return a, err
}

// Artifacts lists a model's files, newest first within each kind.
func (r *Registry) Artifacts(ctx context.Context, modelID string) ([]api.Artifact, error) {
	if _, err := r.Model(ctx, modelID); err != nil {
		return nil, err
	}
	var out []api.Artifact
	err := r.retry(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := r.pool.Query(ctx, `SELECT `+artifactColumns+` FROM artifacts a WHERE a.model_id = $1 ORDER BY a.kind, a.revision DESC`, modelID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			a, err := scanArtifact(rows)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return rows.Err()
	})
	return out, err
}

// Artifact returns one file of a model.
func (r *Registry) Artifact(ctx context.Context, modelID, id string) (api.Artifact, error) {
	a, _, err := r.artifact(ctx, `a.model_id = $1 AND a.id = $2`, modelID, id)
	return a, err
}

// LatestArtifact returns the newest file of a kind (the training data
// for drift and explanations).
func (r *Registry) LatestArtifact(ctx context.Context, modelID, kind string) (api.Artifact, error) {
	a, _, err := r.artifact(ctx, `a.model_id = $1 AND a.kind = $2 ORDER BY a.revision DESC LIMIT 1`, modelID, kind)
	return a, err
}

func (r *Registry) artifact(ctx context.Context, where string, args ...any) (api.Artifact, string, error) {
	if _, err := uuid.Parse(fmt.Sprint(args[0])); err != nil {
		return api.Artifact{}, "", fmt.Errorf("model %v: %w", args[0], ErrNotFound)
	}
	var (
		a   api.Artifact
		key string
	)
	err := r.retry(ctx, func(ctx context.Context) error {
		var err error
		a, err = scanArtifact(r.pool.QueryRow(ctx, `SELECT `+artifactColumns+`, a.object_key FROM artifacts a WHERE `+where, args...), &key)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Artifact{}, "", fmt.Errorf("artifact of model %v: %w", args[0], ErrNotFound)
	}
	return a, key, err
}

// Open opens an artifact's bytes.
func (r *Registry) Open(ctx context.Context, modelID, id string) (io.ReadCloser, api.Artifact, error) {
	a, key, err := r.artifact(ctx, `a.model_id = $1 AND a.id = $2`, modelID, id)
	if err != nil {
		return nil, api.Artifact{}, err
	}
	rc, _, err := r.objects.Get(ctx, key)
	if err != nil {
		return nil, api.Artifact{}, fmt.Errorf("read %s of model %s: %w", a, modelID, err)
	}
	return rc, a, nil
}

const versionColumns = `v.model_id, v.version, v.format, v.created_by, v.created_at,
	COALESCE((SELECT array_agg(al.alias ORDER BY al.alias) FROM model_aliases al WHERE al.model_id = v.model_id AND al.version = v.version), '{}'),
	` + artifactColumns

func scanVersion(row pgx.Row) (api.Version, error) {
	var v api.Version
	err := row.Scan(&v.ModelID, &v.Version, &v.Format, &v.CreatedBy, &v.CreatedAt, &v.Aliases,
		&v.Artifact.ID, &v.Artifact.ModelID, &v.Artifact.Kind, &v.Artifact.Revision, &v.Artifact.FileName, &v.Artifact.ContentType,
		&v.Artifact.Size, &v.Artifact.SHA256, &v.Artifact.CreatedBy, &v.Artifact.CreatedAt)
	if len(v.Aliases) == 0 {
		v.Aliases = nil
	}
	return v, err
}

// Versions lists a model's versions, newest first.
func (r *Registry) Versions(ctx context.Context, modelID string) ([]api.Version, error) {
	if _, err := r.Model(ctx, modelID); err != nil {
		return nil, err
	}
	var out []api.Version
	err := r.retry(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := r.pool.Query(ctx, `SELECT `+versionColumns+` FROM model_versions v JOIN artifacts a ON a.id = v.artifact_id
			WHERE v.model_id = $1 ORDER BY v.version DESC`, modelID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scanVersion(rows)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	return out, err
}

// Resolve finds the version ref names: a number, an alias, or "latest"
// (also the empty ref).
func (r *Registry) Resolve(ctx context.Context, modelID, ref string) (api.Version, error) {
	if _, err := uuid.Parse(modelID); err != nil {
		return api.Version{}, fmt.Errorf("model %s: %w", modelID, ErrNotFound)
	}
	q := `SELECT ` + versionColumns + ` FROM model_versions v JOIN artifacts a ON a.id = v.artifact_id WHERE v.model_id = $1 `
	var arg any
	switch n, err := strconv.Atoi(ref); {
	case ref == "" || ref == "latest":
		q += `AND $2::text IS NOT NULL ORDER BY v.version DESC LIMIT 1`
		arg = ref
	case err == nil:
		q += `AND v.version = $2`
		arg = n
	default:
		q += `AND v.version = (SELECT version FROM model_aliases WHERE model_id = $1 AND alias = $2)`
		arg = ref
	}
	var v api.Version
	err := r.retry(ctx, func(ctx context.Context) error {
		var err error
		v, err = scanVersion(r.pool.QueryRow(ctx, q, modelID, arg))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		if ref == "" || ref == "latest" {
			return api.Version{}, fmt.Errorf("model %s has no version yet: upload a model file first: %w", modelID, ErrNotFound)
		}
		return api.Version{}, fmt.Errorf("model %s has no version %q: %w", modelID, ref, ErrNotFound)
	}
	return v, err
}

// SetAlias points alias at a version of a model.
func (r *Registry) SetAlias(ctx context.Context, modelID, alias string, version int) error {
	if _, err := r.Resolve(ctx, modelID, strconv.Itoa(version)); err != nil {
		return err
	}
	err := r.retry(ctx, func(ctx context.Context) error {
		_, err := r.pool.Exec(ctx, `INSERT INTO model_aliases (model_id, alias, version) VALUES ($1, $2, $3)
			ON CONFLICT (model_id, alias) DO UPDATE SET version = excluded.version, updated_at = now()`, modelID, alias, version)
		return err
	})
	if err == nil {
		r.log.Info("alias set", "model", modelID, "alias", alias, "version", version)
	}
	return err
}

// DeleteAlias removes an alias.
func (r *Registry) DeleteAlias(ctx context.Context, modelID, alias string) error {
	var n int64
	err := r.retry(ctx, func(ctx context.Context) error {
		tag, err := r.pool.Exec(ctx, `DELETE FROM model_aliases WHERE model_id = $1 AND alias = $2`, modelID, alias)
		n = tag.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		return fmt.Errorf("model %s has no alias %q: %w", modelID, alias, ErrNotFound)
	}
	return err
}

// SweepDeletions deletes queued objects from the store: the keys given,
// or (keys nil) the oldest queued ones. It returns how many went.
func (r *Registry) SweepDeletions(ctx context.Context, keys []string) (int, error) {
	if keys == nil {
		err := r.retry(ctx, func(ctx context.Context) error {
			rows, err := r.pool.Query(ctx, `SELECT object_key FROM object_deletions ORDER BY queued_at LIMIT 500`)
			if err != nil {
				return err
			}
			keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	done := 0
	var firstErr error
	for _, k := range keys {
		if err := r.objects.Delete(ctx, k); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			_, _ = r.pool.Exec(ctx, `UPDATE object_deletions SET attempts = attempts + 1, last_error = $2 WHERE object_key = $1`, k, err.Error())
			continue
		}
		if _, err := r.pool.Exec(ctx, `DELETE FROM object_deletions WHERE object_key = $1`, k); err != nil && firstErr == nil {
			firstErr = err
		}
		done++
	}
	return done, firstErr
}

// CollectOrphans deletes objects older than minAge that no artifact row
// knows: uploads whose row was never written. It returns how many went.
func (r *Registry) CollectOrphans(ctx context.Context, minAge time.Duration) (int, error) {
	cutoff := time.Now().Add(-minAge)
	var candidates []string
	if err := r.objects.List(ctx, "models/", func(i objstore.Info) error {
		if i.Modified.Before(cutoff) {
			candidates = append(candidates, i.Key)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	n := 0
	for start := 0; start < len(candidates); start += 1000 {
		batch := candidates[start:min(start+1000, len(candidates))]
		var known []string
		err := r.retry(ctx, func(ctx context.Context) error {
			rows, err := r.pool.Query(ctx, `SELECT object_key FROM artifacts WHERE object_key = ANY($1::text[])`, batch)
			if err != nil {
				return err
			}
			known, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err != nil {
			return n, err
		}
		have := map[string]bool{}
		for _, k := range known {
			have[k] = true
		}
		for _, k := range batch {
			if have[k] {
				continue
			}
			if err := r.objects.Delete(ctx, k); err != nil {
				return n, err
			}
			r.log.Info("orphaned object collected", "key", k)
			n++
		}
	}
	return n, nil
}

// Sweep runs SweepDeletions and CollectOrphans every interval until ctx
// ends.
func (r *Registry) Sweep(ctx context.Context, interval, orphanAge time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := r.SweepDeletions(ctx, nil); err != nil {
			r.log.Warn("queued artifact deletions not done; retrying later", "deleted", n, "err", err)
		}
		if _, err := r.CollectOrphans(ctx, orphanAge); err != nil && ctx.Err() == nil {
			r.log.Warn("orphaned artifacts not collected; retrying later", "err", err)
		}
	}
}
