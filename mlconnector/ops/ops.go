// Package ops is the operations log: every prediction served through the
// connector (input, output, latency, deployment, model version, owner),
// and the operations upstream's inference services record, in
// PostgreSQL, listed by owner and deployment, newest first.
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/db"
)

// Store keeps operations.
type Store struct {
	pool *pgxpool.Pool
	wait time.Duration
}

// New returns the operations log on a migrated database.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, wait: 5 * time.Second} }

// Record stores an operation recorded by a client (upstream's inference
// services). The deployment must exist and serve the model.
func (s *Store) Record(ctx context.Context, c api.OperationCreate) (api.Operation, error) {
	var model string
	var version int
	err := db.Retry(ctx, s.wait, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT model_id, version FROM deployments WHERE id = $1`, c.DeploymentID).Scan(&model, &version)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Operation{}, httpapi.Invalid("no deployment "+c.DeploymentID, []api.Problem{{Field: "deploymentid", Type: httpapi.FieldNotSupported, Message: "Unsupported value: no such deployment"}})
	}
	if err != nil {
		return api.Operation{}, err
	}
	if model != c.ModelID {
		return api.Operation{}, httpapi.Invalid("the deployment serves another model", []api.Problem{{Field: "modelid", Type: httpapi.FieldInvalid, Message: "Invalid value: deployment " + c.DeploymentID + " serves model " + model}})
	}
	op := api.Operation{DeploymentID: c.DeploymentID, ModelID: c.ModelID, ModelVersion: version, OwnerID: c.OwnerID, Data: c.Data, Result: c.Result}
	if c.Timestamp != nil {
		op.Timestamp = c.Timestamp.UTC()
	}
	return s.Insert(ctx, op)
}

// Insert stores an operation; a zero timestamp is now.
func (s *Store) Insert(ctx context.Context, op api.Operation) (api.Operation, error) {
	if op.Timestamp.IsZero() {
		op.Timestamp = time.Now().UTC()
	}
	var result any
	if len(op.Result) > 0 {
		result = []byte(op.Result)
	}
	err := db.Retry(ctx, s.wait, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `INSERT INTO operations (deployment_id, model_id, version, owner, input, output, error, latency_ms, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
			op.DeploymentID, op.ModelID, op.ModelVersion, op.OwnerID, []byte(op.Data), result, op.Error, op.LatencyMS, op.Timestamp).Scan(&op.OperationID)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return api.Operation{}, httpapi.Invalid("no deployment "+op.DeploymentID, []api.Problem{{Field: "deploymentid", Type: httpapi.FieldNotSupported, Message: "Unsupported value: no such deployment"}})
	}
	if errors.As(err, &pgErr) && (pgErr.Code == "22P05" || pgErr.Code == "22P02") {
		return api.Operation{}, httpapi.Invalid("the operation's JSON cannot be stored", []api.Problem{{Field: "data", Type: httpapi.FieldInvalid, Message: "Invalid value: " + pgErr.Message}})
	}
	if err != nil {
		return api.Operation{}, fmt.Errorf("record operation of deployment %s: %w", op.DeploymentID, err)
	}
	return op, nil
}

// List returns operations newest first, filtered by owner and deployment
// (either may be empty), older than after (0: from the newest), and the
// id to continue after (0 on the last page).
func (s *Store) List(ctx context.Context, owner, deployment string, after int64, limit int) ([]api.Operation, int64, error) {
	if limit <= 0 {
		limit = api.DefaultLimit
	}
	var out []api.Operation
	err := db.Retry(ctx, s.wait, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, `SELECT id, deployment_id, model_id, version, owner, input, output, error, latency_ms, created_at
			FROM operations WHERE ($1 = '' OR owner = $1) AND ($2 = '' OR deployment_id = $2) AND ($3 = 0 OR id < $3)
			ORDER BY id DESC LIMIT $4`, owner, deployment, after, limit+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var op api.Operation
			var in, res []byte
			if err := rows.Scan(&op.OperationID, &op.DeploymentID, &op.ModelID, &op.ModelVersion, &op.OwnerID, &in, &res, &op.Error, &op.LatencyMS, &op.Timestamp); err != nil {
				return err
			}
			op.Data, op.Result = json.RawMessage(in), json.RawMessage(res)
			out = append(out, op)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list operations: %w", err)
	}
	var next int64
	if len(out) > limit {
		out = out[:limit]
		next = out[len(out)-1].OperationID
	}
	return out, next, nil
}
