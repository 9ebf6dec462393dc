package registry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mlsysops-go/mlsysops/mlconnector/internal/dbtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

// BenchmarkListModels: the latency of listing a registry of 10,000 models
// (each with a version and an alias), a page of 100 and the whole list in
// pages of 1,000, and of a tag search, on a real PostgreSQL.
func BenchmarkListModels(b *testing.B) {
	ctx := context.Background()
	pool := dbtest.Pool(b)
	store, _ := objstore.NewFS(b.TempDir())
	r := registry.New(pool, store, registry.Options{})
	const n = 10000
	start := time.Now()
	rows := make([][]any, 0, n)
	for i := 0; i < n; i++ {
		rows = append(rows, []any{uuid.NewString(), fmt.Sprintf("model-%05d", i), []string{"classification", "regression"}[i%2],
			"onnx", "bench", []string{fmt.Sprintf("team-%d", i%50), "bench"},
			[]byte(`[{"feature_name": "a", "type": "cont", "kind": 0}, {"feature_name": "b", "type": "cat", "kind": 0}]`)})
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"models"}, []string{"id", "name", "kind", "format", "owner", "tags", "features"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO artifacts (id, model_id, kind, revision, file_name, content_type, size_bytes, sha256, object_key)
		SELECT gen_random_uuid()::text, id, 'model', 1, 'm.onnx', 'application/octet-stream', 784, repeat('a', 64), 'models/' || id || '/m' FROM models`); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO model_versions (model_id, version, artifact_id, format) SELECT model_id, 1, id, 'onnx' FROM artifacts`); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO model_aliases (model_id, alias, version) SELECT id, 'production', 1 FROM models; ANALYZE`); err != nil {
		b.Fatal(err)
	}
	b.Logf("registry of %d models loaded in %v", n, time.Since(start))
	var plan []string
	if rows, err := pool.Query(ctx, `EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) SELECT count(*) FROM (SELECT m.id,
		(SELECT max(v.version) FROM model_versions v WHERE v.model_id = m.id),
		(SELECT jsonb_object_agg(a.alias, a.version) FROM model_aliases a WHERE a.model_id = m.id)
		FROM models m ORDER BY m.id LIMIT 100) x`); err == nil {
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			plan = append(plan, s)
		}
		rows.Close()
	}
	b.Logf("the page query in PostgreSQL: %s", plan[len(plan)-1])
	b.Run("page-of-100", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			page, _, err := r.Models(ctx, registry.ListOptions{Limit: 100})
			if err != nil || len(page) != 100 {
				b.Fatal(len(page), err)
			}
		}
	})
	b.Run("all-10000", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			total, after := 0, ""
			for {
				page, next, err := r.Models(ctx, registry.ListOptions{Limit: 1000, After: after})
				if err != nil {
					b.Fatal(err)
				}
				total += len(page)
				if next == "" {
					break
				}
				after = next
			}
			if total != n {
				b.Fatalf("listed %d", total)
			}
		}
	})
	b.Run("tag-search", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			page, _, err := r.Models(ctx, registry.ListOptions{Tags: []string{"team-7"}, Limit: 1000})
			if err != nil || len(page) != n/50 {
				b.Fatal(len(page), err)
			}
		}
	})
}
