// Package explain computes per-feature Shapley values of one prediction
// against a background sample of the training data (interventional
// Shapley values: a feature left out of a coalition takes the background's
// values, and v(S) is the mean prediction over the background rows).
//
// With few features (MaxExactFeatures) every coalition is evaluated and the
// values are exact; otherwise they are estimated from random permutations
// (with their reverses, antithetic pairs), seeded, so that a request is
// reproducible. Either way the values of one output sum to the prediction
// minus the base value (the mean prediction over the background): each
// permutation's contributions telescope to exactly that.
package explain

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Function evaluates a model on rows of features and returns, for each
// row, the explained output's values (one per class, or one for a
// regressor), flattened row-major: len(rows)*width values.
type Function func(ctx context.Context, rows [][]float64) ([]float64, error)

// Methods.
const (
	Auto     = "auto"
	Exact    = "exact"
	Sampling = "sampling"
)

// Defaults.
const (
	// MaxExactFeatures is the most features Auto evaluates exactly: 2^10
	// coalitions times the background size.
	MaxExactFeatures = 10
	// MaxFeatures bounds what an exact request may ask for.
	MaxFeatures = 16
	// DefaultBudget is the number of model evaluations (rows) Sampling
	// aims at when the permutations are not given.
	DefaultBudget = 400_000
	// MinPermutations and MaxPermutations bound the permutations Sampling
	// uses when it chooses them itself.
	MinPermutations = 16
	MaxPermutations = 2000
	// batchRows bounds the rows of one model call.
	batchRows = 8192
)

// Options of one explanation.
type Options struct {
	// Method is Auto (Exact up to MaxExactFeatures, Sampling beyond),
	// Exact or Sampling.
	Method string
	// Permutations is the number of permutations Sampling evaluates (an
	// even number: each comes with its reverse); 0 chooses from Budget.
	Permutations int
	// Budget is the rows Sampling may evaluate when Permutations is 0.
	Budget int
	// Seed seeds Sampling's permutations.
	Seed uint64
}

// Result is an explanation of one prediction.
type Result struct {
	Method string
	// BaseValue is the mean prediction over the background, per output.
	BaseValue []float64
	// Prediction is the model's prediction for x, per output.
	Prediction []float64
	// Values are the Shapley values, [feature][output].
	Values [][]float64
	// StdErr is Sampling's standard error of each value, [feature][output].
	StdErr [][]float64
	// Permutations is how many permutations Sampling evaluated.
	Permutations int
	// Evaluations is the number of rows the model evaluated.
	Evaluations int
}

// Shapley explains f at x against the background rows; width is the
// number of values f returns per row.
func Shapley(ctx context.Context, f Function, width int, x []float64, background [][]float64, opts Options) (*Result, error) {
	m := len(x)
	if m == 0 {
		return nil, errors.New("no features")
	}
	if len(background) == 0 {
		return nil, errors.New("no background rows")
	}
	for i, b := range background {
		if len(b) != m {
			return nil, fmt.Errorf("background row %d has %d features, want %d", i, len(b), m)
		}
	}
	e := &evaluator{f: f, width: width, x: x, bg: background, ctx: ctx}
	method := opts.Method
	if method == "" || method == Auto {
		method = Exact
		if m > MaxExactFeatures {
			method = Sampling
		}
	}
	switch method {
	case Exact:
		if m > MaxFeatures {
			return nil, fmt.Errorf("exact Shapley values of %d features need 2^%d coalitions: at most %d features, or the sampling method", m, m, MaxFeatures)
		}
		return e.exact()
	case Sampling:
		k := opts.Permutations
		if k == 0 {
			budget := opts.Budget
			if budget <= 0 {
				budget = DefaultBudget
			}
			k = budget / (max(m-1, 1) * len(background))
			k = min(max(k, MinPermutations), MaxPermutations)
		}
		k += k % 2
		return e.sampling(k, opts.Seed)
	}
	return nil, fmt.Errorf("method %q: want %s, %s or %s", opts.Method, Auto, Exact, Sampling)
}

type evaluator struct {
	ctx   context.Context
	f     Function
	width int
	x     []float64
	bg    [][]float64
	evals int
}

// values returns v(S) for each coalition in masks: the mean over the
// background of f with the features in S taken from x. masks[i][j] says
// whether feature j is in coalition i.
func (e *evaluator) values(masks [][]bool) ([][]float64, error) {
	out := make([][]float64, len(masks))
	b := len(e.bg)
	per := max(1, batchRows/b)
	for start := 0; start < len(masks); start += per {
		end := min(start+per, len(masks))
		rows := make([][]float64, 0, (end-start)*b)
		for _, mask := range masks[start:end] {
			for _, bg := range e.bg {
				row := make([]float64, len(e.x))
				for j := range row {
					if mask[j] {
						row[j] = e.x[j]
					} else {
						row[j] = bg[j]
					}
				}
				rows = append(rows, row)
			}
		}
		if err := e.ctx.Err(); err != nil {
			return nil, err
		}
		pred, err := e.f(e.ctx, rows)
		if err != nil {
			return nil, err
		}
		if len(pred) != len(rows)*e.width {
			return nil, fmt.Errorf("the model returned %d values for %d rows of width %d", len(pred), len(rows), e.width)
		}
		e.evals += len(rows)
		for i := range end - start {
			v := make([]float64, e.width)
			for r := range b {
				for k := range v {
					v[k] += pred[(i*b+r)*e.width+k]
				}
			}
			for k := range v {
				v[k] /= float64(b)
			}
			out[start+i] = v
		}
	}
	return out, nil
}

func (e *evaluator) exact() (*Result, error) {
	m := len(e.x)
	n := 1 << m
	masks := make([][]bool, n)
	for s := range n {
		masks[s] = make([]bool, m)
		for j := range m {
			masks[s][j] = s&(1<<j) != 0
		}
	}
	v, err := e.values(masks)
	if err != nil {
		return nil, err
	}
	// weight[s] = s!(m-s-1)!/m!, the share of orderings in which a
	// coalition of size s precedes the feature.
	fact := make([]float64, m+1)
	fact[0] = 1
	for i := 1; i <= m; i++ {
		fact[i] = fact[i-1] * float64(i)
	}
	weight := make([]float64, m)
	for s := range m {
		weight[s] = fact[s] * fact[m-s-1] / fact[m]
	}
	phi := zeros(m, e.width)
	for s := range n {
		size := popcount(s)
		for i := range m {
			if s&(1<<i) != 0 {
				continue
			}
			w := weight[size]
			with := v[s|1<<i]
			for k := range e.width {
				phi[i][k] += w * (with[k] - v[s][k])
			}
		}
	}
	return &Result{Method: Exact, BaseValue: v[0], Prediction: v[n-1], Values: phi, Evaluations: e.evals}, nil
}

func (e *evaluator) sampling(k int, seed uint64) (*Result, error) {
	m := len(e.x)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ends, err := e.values([][]bool{make([]bool, m), full(m)})
	if err != nil {
		return nil, err
	}
	base, pred := ends[0], ends[1]
	pairs := k / 2
	sum, sumSq := zeros(m, e.width), zeros(m, e.width)
	for range pairs {
		perm := rng.Perm(m)
		pair := zeros(m, e.width)
		for _, order := range [][]int{perm, reverse(perm)} {
			// Coalitions of the first 1..m-1 features of the ordering; the
			// empty and the full one are base and pred.
			masks := make([][]bool, m-1)
			mask := make([]bool, m)
			for p := 0; p < m-1; p++ {
				mask[order[p]] = true
				masks[p] = append([]bool(nil), mask...)
			}
			v, err := e.values(masks)
			if err != nil {
				return nil, err
			}
			prev := base
			for p, j := range order {
				next := pred
				if p < m-1 {
					next = v[p]
				}
				for c := range e.width {
					pair[j][c] += (next[c] - prev[c]) / 2
				}
				prev = next
			}
		}
		for j := range m {
			for c := range e.width {
				sum[j][c] += pair[j][c]
				sumSq[j][c] += pair[j][c] * pair[j][c]
			}
		}
	}
	phi, se := zeros(m, e.width), zeros(m, e.width)
	n := float64(pairs)
	for j := range m {
		for c := range e.width {
			mean := sum[j][c] / n
			phi[j][c] = mean
			if pairs > 1 {
				variance := (sumSq[j][c] - n*mean*mean) / (n - 1)
				se[j][c] = math.Sqrt(math.Max(variance, 0) / n)
			}
		}
	}
	return &Result{Method: Sampling, BaseValue: base, Prediction: pred, Values: phi, StdErr: se,
		Permutations: 2 * pairs, Evaluations: e.evals}, nil
}

func zeros(m, w int) [][]float64 {
	z := make([][]float64, m)
	for i := range z {
		z[i] = make([]float64, w)
	}
	return z
}

func full(m int) []bool {
	b := make([]bool, m)
	for i := range b {
		b[i] = true
	}
	return b
}

func reverse(p []int) []int {
	r := make([]int, len(p))
	for i, v := range p {
		r[len(p)-1-i] = v
	}
	return r
}

func popcount(s int) int {
	n := 0
	for ; s != 0; s &= s - 1 {
		n++
	}
	return n
}
