// Package runtimes maps model formats to serving images: the built-in
// runtime is the project's model server (ONNX, LightGBM, XGBoost); others
// (an LLM server, a framework's own server) are registered at run time and
// kept in PostgreSQL. Every runtime speaks the Open Inference Protocol v2.
package runtimes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/db"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

// BuiltInName names the built-in runtime.
const BuiltInName = "modelserver"

// BuiltIn returns the built-in runtime serving image on port.
func BuiltIn(image string, port int32) api.Runtime {
	return api.Runtime{Name: BuiltInName, Formats: append([]string(nil), api.ModelFormats...), Image: image, Port: port, BuiltIn: true}
}

// Registry keeps the runtimes.
type Registry struct {
	pool    *pgxpool.Pool
	builtIn api.Runtime
}

// New returns a registry with builtIn and the runtimes stored in the
// database.
func New(pool *pgxpool.Pool, builtIn api.Runtime) *Registry {
	return &Registry{pool: pool, builtIn: builtIn}
}

// List returns the built-in runtime first, then the registered ones by
// name.
func (r *Registry) List(ctx context.Context) ([]api.Runtime, error) {
	out := []api.Runtime{r.builtIn}
	err := db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		out = out[:1]
		rows, err := r.pool.Query(ctx, `SELECT name, formats, image, port, args, created_by, created_at FROM runtimes ORDER BY name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var rt api.Runtime
			var args []byte
			if err := rows.Scan(&rt.Name, &rt.Formats, &rt.Image, &rt.Port, &args, &rt.CreatedBy, &rt.CreatedAt); err != nil {
				return err
			}
			if err := json.Unmarshal(args, &rt.Args); err != nil {
				return fmt.Errorf("runtime %s: stored args unreadable: %w", rt.Name, err)
			}
			out = append(out, rt)
		}
		return rows.Err()
	})
	return out, err
}

// Get returns a runtime by name.
func (r *Registry) Get(ctx context.Context, name string) (api.Runtime, error) {
	list, err := r.List(ctx)
	if err != nil {
		return api.Runtime{}, err
	}
	for _, rt := range list {
		if rt.Name == name {
			return rt, nil
		}
	}
	return api.Runtime{}, fmt.Errorf("runtime %q: %w", name, registry.ErrNotFound)
}

// ForFormat returns the runtime that serves format: a registered one
// first (so a site can replace the built-in for a format), else the
// built-in runtime.
func (r *Registry) ForFormat(ctx context.Context, format string) (api.Runtime, error) {
	list, err := r.List(ctx)
	if err != nil {
		return api.Runtime{}, err
	}
	for _, rt := range list[1:] {
		if slices.Contains(rt.Formats, format) {
			return rt, nil
		}
	}
	if slices.Contains(r.builtIn.Formats, format) {
		return r.builtIn, nil
	}
	var known []string
	for _, rt := range list {
		known = append(known, rt.Formats...)
	}
	sort.Strings(known)
	return api.Runtime{}, &httpapi.Error{Status: 422, Type: httpapi.ProblemInvalid,
		Detail:   fmt.Sprintf("no runtime serves models of format %q (served: %s); register one with PUT /v1/runtimes/{name}", format, strings.Join(slices.Compact(known), ", ")),
		Problems: []api.Problem{{Field: "runtime", Type: httpapi.FieldRequired, Message: "no runtime for format " + format}}}
}

// Put registers or replaces a runtime; it reports whether it is new.
func (r *Registry) Put(ctx context.Context, rt api.Runtime, by string) (api.Runtime, bool, error) {
	if rt.Name == r.builtIn.Name {
		return api.Runtime{}, false, &httpapi.Error{Status: 409, Type: httpapi.ProblemConflict, Detail: "the built-in runtime " + rt.Name + " cannot be replaced; register another name"}
	}
	args, _ := json.Marshal(rt.Args)
	if rt.Args == nil {
		args = []byte("[]")
	}
	var created bool
	err := db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		return r.pool.QueryRow(ctx, `INSERT INTO runtimes (name, formats, image, port, args, created_by) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (name) DO UPDATE SET formats = excluded.formats, image = excluded.image, port = excluded.port, args = excluded.args
			RETURNING (xmax = 0), created_by, created_at`, rt.Name, rt.Formats, rt.Image, rt.Port, args, by).Scan(&created, &rt.CreatedBy, &rt.CreatedAt)
	})
	return rt, created, err
}

// Delete removes a registered runtime.
func (r *Registry) Delete(ctx context.Context, name string) error {
	if name == r.builtIn.Name {
		return &httpapi.Error{Status: 409, Type: httpapi.ProblemConflict, Detail: "the built-in runtime cannot be removed"}
	}
	var n int64
	err := db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		tag, err := r.pool.Exec(ctx, `DELETE FROM runtimes WHERE name = $1`, name)
		n = tag.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		return fmt.Errorf("runtime %q: %w", name, registry.ErrNotFound)
	}
	return err
}
