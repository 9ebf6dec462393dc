// Package drift tells when the inputs a deployed model receives drift
// away from its training data: per input feature, Welch's t-test (mean
// shift), the two-sample Kolmogorov–Smirnov test or the RBF maximum mean
// discrepancy for continuous features, as the model's drift_detection
// method says, and chi-squared on the category counts for categorical
// ones. Statistics and p-values equal SciPy's (testdata/gen.py writes the
// fixtures the tests compare with). Every run is stored per feature
// (statistic, p-value, method, drift flag, time), listed by the API and
// drawn as a PNG chart per model.
package drift

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/db"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

// Methods, as stored with each result.
const (
	MethodWelch = "welch_t"
	MethodKS    = "ks"
	MethodMMD   = "mmd"
	MethodChi2  = "chi2"
)

// Thresholds: a p-value below Alpha is drift; an MMD above MMDThreshold
// is drift (upstream's rule, with the RBF kernel's gamma MMDGamma).
const (
	Alpha        = 0.05
	MMDThreshold = 0.1
	MMDGamma     = 1.0
	// MinSamples is the fewest recent inputs a check needs (upstream's).
	MinSamples = 10
	// mmdMaxSample bounds each sample of the quadratic MMD; larger ones
	// are subsampled (seeded, so a rerun gives the same answer).
	mmdMaxSample = 2000
)

// Options tune a Detector.
type Options struct {
	// Window is how far back inputs count as recent; default 24h.
	Window time.Duration
	// MaxSamples bounds the recent inputs read (the newest); default
	// 100,000.
	MaxSamples int
	// MaxDataBytes bounds the training data file read; default 256 MiB.
	MaxDataBytes int64
	Logger       *slog.Logger
	Registerer   prometheus.Registerer
}

// Detector runs drift checks.
type Detector struct {
	reg  *registry.Registry
	pool *pgxpool.Pool
	o    Options
	log  *slog.Logger
	runs *prometheus.CounterVec
	dur  prometheus.Histogram
}

// New returns a detector on the registry's database.
func New(reg *registry.Registry, o Options) (*Detector, error) {
	if o.Window <= 0 {
		o.Window = 24 * time.Hour
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = 100_000
	}
	if o.MaxDataBytes <= 0 {
		o.MaxDataBytes = 256 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	d := &Detector{reg: reg, pool: reg.Pool(), o: o, log: o.Logger.With("component", "drift"),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mlsysops", Subsystem: "mlconnector", Name: "drift_runs_total",
			Help: "Drift checks by trigger and outcome (ok, drift, skipped, error)."}, []string{"trigger", "outcome"}),
		dur: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "mlsysops", Subsystem: "mlconnector", Name: "drift_run_duration_seconds",
			Help: "Time of one drift check.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{d.runs, d.dur} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

// notEnough is the 409 of a check that lacks data.
func notEnough(format string, args ...any) error {
	return &httpapi.Error{Status: 409, Type: httpapi.ProblemConflict, Detail: fmt.Sprintf(format, args...)}
}

// Run checks a model's recent inputs against its training data and
// stores the results.
func (d *Detector) Run(ctx context.Context, modelID, trigger string) (api.DriftRun, error) {
	start := time.Now()
	run, err := d.run(ctx, modelID, trigger, start)
	d.dur.Observe(time.Since(start).Seconds())
	outcome := "ok"
	var he *httpapi.Error
	switch {
	case errors.As(err, &he) && he.Status == 409:
		outcome = "skipped"
	case err != nil:
		outcome = "error"
	case run.Drifting > 0:
		outcome = "drift"
	}
	d.runs.WithLabelValues(trigger, outcome).Inc()
	return run, err
}

func (d *Detector) run(ctx context.Context, modelID, trigger string, start time.Time) (api.DriftRun, error) {
	m, err := d.reg.Model(ctx, modelID)
	if err != nil {
		return api.DriftRun{}, err
	}
	inputs := m.Inputs()
	if len(inputs) == 0 {
		return api.DriftRun{}, notEnough("model %s lists no input features (featurelist entries of kind 0); drift compares them", modelID)
	}
	_, method := m.DriftDetection.Enabled()
	current, err := d.recentInputs(ctx, modelID, start)
	if err != nil {
		return api.DriftRun{}, err
	}
	if len(current) < MinSamples {
		return api.DriftRun{}, notEnough("model %s has %d input(s) in the last %s; a drift check needs at least %d", modelID, len(current), d.o.Window, MinSamples)
	}
	ref, err := d.reference(ctx, modelID, inputs)
	if err != nil {
		return api.DriftRun{}, err
	}
	run := api.DriftRun{ModelID: modelID, Trigger: trigger, StartedAt: start.UTC(), SampleSize: len(current), ReferenceSize: ref.rows}
	var skipped []string
	for _, f := range inputs {
		res, ok := compare(f, method, ref.columns[f.FeatureName], current)
		if !ok {
			skipped = append(skipped, f.FeatureName)
			continue
		}
		if res.Drift {
			run.Drifting++
		}
		run.Results = append(run.Results, res)
	}
	if len(skipped) > 0 {
		run.Message = "not enough numeric values in the training data or the inputs for: " + strings.Join(skipped, ", ")
	}
	run.FinishedAt = time.Now().UTC()
	if err := d.store(ctx, &run); err != nil {
		return api.DriftRun{}, err
	}
	d.log.Info("drift checked", "model", modelID, "trigger", trigger, "inputs", run.SampleSize, "reference", run.ReferenceSize,
		"drifting", run.Drifting, "duration_ms", run.FinishedAt.Sub(start).Milliseconds())
	return run, nil
}

// compare tests one feature; false when either side has too few values.
func compare(f api.Feature, method int, ref []string, current []map[string]json.RawMessage) (api.DriftResult, bool) {
	res := api.DriftResult{Feature: f.FeatureName, Type: f.Type}
	if f.Type == api.FeatureCategorical {
		var cur []string
		for _, row := range current {
			if v, ok := row[f.FeatureName]; ok {
				cur = append(cur, category(v))
			}
		}
		if len(ref) == 0 || len(cur) < MinSamples {
			return res, false
		}
		t, _ := ChiSquared(ref, cur)
		res.Method, res.Statistic = MethodChi2, t.Statistic
		res.PValue, res.Drift = pval(t.PValue), t.PValue < Alpha
		return res, true
	}
	a := numbers(ref)
	var b []float64
	for _, row := range current {
		if v, ok := row[f.FeatureName]; ok {
			if x, ok := number(v); ok {
				b = append(b, x)
			}
		}
	}
	if len(a) < 2 || len(b) < MinSamples {
		return res, false
	}
	switch method {
	case api.DriftMMD:
		s := MMD(subsample(a, mmdMaxSample), subsample(b, mmdMaxSample), MMDGamma)
		res.Method, res.Statistic, res.Drift = MethodMMD, s, s > MMDThreshold
	case api.DriftKS:
		t := KS2(a, b)
		res.Method, res.Statistic = MethodKS, t.Statistic
		res.PValue, res.Drift = pval(t.PValue), t.PValue < Alpha
	default:
		t := WelchT(a, b)
		res.Method, res.Statistic = MethodWelch, t.Statistic
		res.PValue, res.Drift = pval(t.PValue), t.PValue < Alpha
	}
	return res, true
}

func pval(p float64) *float64 {
	if math.IsNaN(p) {
		return nil
	}
	return &p
}

// subsample keeps at most n values, chosen with a fixed seed.
func subsample(x []float64, n int) []float64 {
	if len(x) <= n {
		return x
	}
	r := rand.New(rand.NewPCG(1, 2))
	idx := r.Perm(len(x))[:n]
	out := make([]float64, n)
	for i, j := range idx {
		out[i] = x[j]
	}
	return out
}

func numbers(s []string) []float64 {
	out := make([]float64, 0, len(s))
	for _, v := range s {
		if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && !math.IsNaN(x) && !math.IsInf(x, 0) {
			out = append(out, x)
		}
	}
	return out
}

// number reads a JSON number (or a numeric string, or a boolean as 0/1).
func number(raw json.RawMessage) (float64, bool) {
	var x float64
	if err := json.Unmarshal(raw, &x); err == nil {
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		return x, err == nil && !math.IsNaN(x) && !math.IsInf(x, 0)
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		if b {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// category reads a categorical value as the text of its category, so that
// "a" in the inputs matches a in the CSV, and 1 matches 1.
func category(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	var x float64
	if err := json.Unmarshal(raw, &x); err == nil {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return string(raw)
}

// recentInputs reads the newest inputs of the model's deployments within
// the window: each operation's data is a row, or a list of rows.
func (d *Detector) recentInputs(ctx context.Context, modelID string, now time.Time) ([]map[string]json.RawMessage, error) {
	var rows []map[string]json.RawMessage
	err := db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		rows = rows[:0]
		r, err := d.pool.Query(ctx, `SELECT input FROM operations WHERE model_id = $1 AND created_at >= $2 AND error = ''
			ORDER BY created_at DESC LIMIT $3`, modelID, now.Add(-d.o.Window), d.o.MaxSamples)
		if err != nil {
			return err
		}
		defer r.Close()
		for r.Next() && len(rows) < d.o.MaxSamples {
			var b []byte
			if err := r.Scan(&b); err != nil {
				return err
			}
			rows = appendRows(rows, b, d.o.MaxSamples)
		}
		return r.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read the recent inputs of model %s: %w", modelID, err)
	}
	return rows, nil
}

// appendRows adds the rows of one operation's input: {"data": ...} as
// upstream recorded it, an object (one row) or a list of objects.
func appendRows(rows []map[string]json.RawMessage, b []byte, limit int) []map[string]json.RawMessage {
	var one map[string]json.RawMessage
	if json.Unmarshal(b, &one) == nil {
		if inner, ok := one["data"]; ok && len(one) <= 2 {
			return appendRows(rows, inner, limit)
		}
		return append(rows, one)
	}
	var many []map[string]json.RawMessage
	if json.Unmarshal(b, &many) == nil {
		for _, r := range many {
			if len(rows) >= limit {
				break
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// referenceData is the training data's values by feature.
type referenceData struct {
	columns map[string][]string
	rows    int
}

// reference reads the model's newest data file: a CSV whose header names
// the features.
func (d *Detector) reference(ctx context.Context, modelID string, inputs []api.Feature) (referenceData, error) {
	a, err := d.reg.LatestArtifact(ctx, modelID, api.FileData)
	if errors.Is(err, registry.ErrNotFound) {
		return referenceData{}, notEnough("model %s has no training data: upload a CSV with file_kind=data", modelID)
	}
	if err != nil {
		return referenceData{}, err
	}
	rc, _, err := d.reg.Open(ctx, modelID, a.ID)
	if err != nil {
		return referenceData{}, err
	}
	defer rc.Close()
	return readCSV(io.LimitReader(rc, d.o.MaxDataBytes), inputs, a.FileName)
}

func readCSV(r io.Reader, inputs []api.Feature, name string) (referenceData, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return referenceData{}, notEnough("training data %s is not a CSV with a header: %v", name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	out := referenceData{columns: map[string][]string{}}
	var missing []string
	for _, f := range inputs {
		if _, ok := col[f.FeatureName]; !ok {
			missing = append(missing, f.FeatureName)
		}
	}
	if len(missing) == len(inputs) {
		return referenceData{}, notEnough("training data %s has none of the input features in its header (want %s)", name, strings.Join(missing, ", "))
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return referenceData{}, notEnough("training data %s: %v", name, err)
		}
		out.rows++
		for _, f := range inputs {
			if i, ok := col[f.FeatureName]; ok && i < len(rec) {
				out.columns[f.FeatureName] = append(out.columns[f.FeatureName], strings.TrimSpace(rec[i]))
			}
		}
	}
	return out, nil
}

// store writes the run and its results in one transaction.
func (d *Detector) store(ctx context.Context, run *api.DriftRun) error {
	return db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		return db.InTx(ctx, d.pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `INSERT INTO drift_runs (model_id, trigger, started_at, finished_at, sample_size, reference_size, drifting, message)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`, run.ModelID, run.Trigger, run.StartedAt, run.FinishedAt,
				run.SampleSize, run.ReferenceSize, run.Drifting, run.Message).Scan(&run.ID); err != nil {
				return err
			}
			for i := range run.Results {
				r := &run.Results[i]
				r.RunID, r.Timestamp = run.ID, run.FinishedAt
				if _, err := tx.Exec(ctx, `INSERT INTO drift_results (run_id, model_id, feature, feature_type, method, statistic, p_value, drift, created_at)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, run.ID, run.ModelID, r.Feature, r.Type, r.Method, r.Statistic, r.PValue, r.Drift, r.Timestamp); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// Results lists a model's stored results, newest first, before the
// result id after (0: from the newest), and the id to continue after.
func (d *Detector) Results(ctx context.Context, modelID string, after int64, limit int) ([]api.DriftResult, int64, error) {
	var out []api.DriftResult
	var ids []int64
	err := db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		out, ids = out[:0], ids[:0]
		rows, err := d.pool.Query(ctx, `SELECT id, run_id, feature, feature_type, method, statistic, p_value, drift, created_at
			FROM drift_results WHERE model_id = $1 AND ($2 = 0 OR id < $2) ORDER BY id DESC LIMIT $3`, modelID, after, limit+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r api.DriftResult
			var id int64
			if err := rows.Scan(&id, &r.RunID, &r.Feature, &r.Type, &r.Method, &r.Statistic, &r.PValue, &r.Drift, &r.Timestamp); err != nil {
				return err
			}
			out, ids = append(out, r), append(ids, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, err
	}
	var next int64
	if len(out) > limit {
		out, next = out[:limit], ids[limit-1]
	}
	return out, next, nil
}

// Schedule checks every model with drift detection on, every interval,
// until ctx ends. Models without enough data are skipped quietly.
func (d *Detector) Schedule(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		d.RunAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunAll checks every model with drift detection on once.
func (d *Detector) RunAll(ctx context.Context) {
	var ids []string
	err := db.Retry(ctx, 5*time.Second, func(ctx context.Context) error {
		rows, err := d.pool.Query(ctx, `SELECT id FROM models WHERE drift @> '[{"is_true": 1}]'::jsonb ORDER BY id`)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("drift schedule: models not read; retrying at the next tick", "err", err)
		}
		return
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		if _, err := d.Run(ctx, id, "scheduled"); err != nil {
			var he *httpapi.Error
			if errors.As(err, &he) && he.Status == 409 {
				d.log.Debug("drift check skipped", "model", id, "reason", he.Detail)
				continue
			}
			d.log.Warn("drift check failed", "model", id, "err", err)
		}
	}
}
