package drift

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// TestResult is a statistic and its p-value (NaN when the test has none).
type TestResult struct {
	Statistic float64
	PValue    float64
}

// WelchT is Welch's two-sample t-test (unequal variances, two-sided), as
// scipy.stats.ttest_ind(a, b, equal_var=False) computes it. With no
// variance in either sample it says the means are equal (p 1) or differ
// (p 0), where scipy answers NaN.
func WelchT(a, b []float64) TestResult {
	n1, n2 := float64(len(a)), float64(len(b))
	m1, v1 := meanVar(a)
	m2, v2 := meanVar(b)
	se1, se2 := v1/n1, v2/n2
	se := se1 + se2
	if se == 0 || math.IsNaN(se) {
		switch {
		case m1 == m2:
			return TestResult{Statistic: 0, PValue: 1}
		case m1 > m2:
			return TestResult{Statistic: math.MaxFloat64, PValue: 0}
		default:
			return TestResult{Statistic: -math.MaxFloat64, PValue: 0}
		}
	}
	t := (m1 - m2) / math.Sqrt(se)
	df := se * se / (se1*se1/(n1-1) + se2*se2/(n2-1))
	p := 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Survival(math.Abs(t))
	return TestResult{Statistic: t, PValue: math.Min(p, 1)}
}

// meanVar returns the mean and the unbiased variance (ddof 1); the
// variance is NaN for fewer than two values.
func meanVar(x []float64) (float64, float64) {
	n := float64(len(x))
	var sum float64
	for _, v := range x {
		sum += v
	}
	mean := sum / n
	if len(x) < 2 {
		return mean, math.NaN()
	}
	var ss, c float64
	for _, v := range x {
		d := v - mean
		ss += d * d
		c += d
	}
	// Compensated (two-pass) variance.
	return mean, (ss - c*c/n) / (n - 1)
}

// maxExactKS is the largest sample for which the two-sample
// Kolmogorov–Smirnov p-value is exact, as scipy's 'auto' method chooses.
const maxExactKS = 10000

// KS2 is the two-sample Kolmogorov–Smirnov test (two-sided), as
// scipy.stats.ks_2samp(a, b, method='auto') computes it: the exact
// distribution when neither sample has more than 10,000 values, the
// asymptotic one (the one-sample Kolmogorov distribution at the effective
// size round(n1*n2/(n1+n2))) otherwise.
func KS2(a, b []float64) TestResult {
	x := append([]float64(nil), a...)
	y := append([]float64(nil), b...)
	sort.Float64s(x)
	sort.Float64s(y)
	n1, n2 := len(x), len(y)
	// D = max over every value v of |F1(v) - F2(v)|, with right-continuous
	// empirical distribution functions (ties stepped together).
	var d float64
	i, j := 0, 0
	for i < n1 || j < n2 {
		var v float64
		switch {
		case j >= n2 || (i < n1 && x[i] <= y[j]):
			v = x[i]
		default:
			v = y[j]
		}
		for i < n1 && x[i] == v {
			i++
		}
		for j < n2 && y[j] == v {
			j++
		}
		d = math.Max(d, math.Abs(float64(i)/float64(n1)-float64(j)/float64(n2)))
	}
	if max(n1, n2) <= maxExactKS {
		g := gcd(n1, n2)
		lcm := float64(n1/g) * float64(n2)
		h := int64(math.Round(d * lcm))
		d = float64(h) / lcm
		if h == 0 {
			return TestResult{Statistic: d, PValue: 1}
		}
		return TestResult{Statistic: d, PValue: clip01(1 - insideBand(n1, n2, h*int64(g)))}
	}
	m, n := float64(max(n1, n2)), float64(min(n1, n2))
	en := math.Round(m * n / (m + n))
	return TestResult{Statistic: d, PValue: clip01(KolmogorovSF(int(en), d))}
}

// insideBand is the probability that a random lattice path from (0, 0) to
// (n1, n2), equally likely among all, stays strictly inside the band
// |i*n2 - j*n1| < w: that the two samples' empirical distributions never
// differ by w/(n1*n2) or more under the null hypothesis. It walks the
// band column by column, moving probability with the chances of the next
// value coming from either sample (sampling without replacement), so every
// intermediate value is a probability and nothing overflows.
func insideBand(n1, n2 int, w int64) float64 {
	N1, N2 := int64(n1), int64(n2)
	// lo(i) and hi(i) bound j in column i.
	lo := func(i int64) int64 {
		// smallest j with i*n2 - j*n1 < w  <=>  j > (i*n2 - w)/n1
		num := i*N2 - w
		j := floorDiv(num, N1) + 1
		return max(j, 0)
	}
	hi := func(i int64) int64 {
		// largest j with j*n1 - i*n2 < w  <=>  j < (i*n2 + w)/n1
		num := i*N2 + w
		j := ceilDiv(num, N1) - 1
		return min(j, N2)
	}
	cur := make([]float64, n2+1)
	next := make([]float64, n2+1)
	// Column 0: j from 0 up to hi(0), reached by steps in y only.
	l0, h0 := lo(0), hi(0)
	if l0 > 0 {
		return 0
	}
	total := float64(n1 + n2)
	cur[0] = 1
	for j := int64(1); j <= h0; j++ {
		// from (0, j-1) to (0, j): a value of the second sample.
		cur[j] = cur[j-1] * float64(N2-(j-1)) / (total - float64(j-1))
	}
	prevLo, prevHi := l0, h0
	for i := int64(1); i <= N1; i++ {
		l, h := lo(i), hi(i)
		for j := l; j <= h; j++ {
			var p float64
			if j >= prevLo && j <= prevHi {
				// from (i-1, j): a value of the first sample.
				p += cur[j] * float64(N1-(i-1)) / (total - float64(i-1+j))
			}
			if j > l {
				// from (i, j-1): a value of the second sample.
				p += next[j-1] * float64(N2-(j-1)) / (total - float64(i+j-1))
			}
			next[j] = p
		}
		for j := prevLo; j <= prevHi; j++ {
			cur[j] = 0
		}
		cur, next = next, cur
		prevLo, prevHi = l, h
	}
	if N2 < prevLo || N2 > prevHi {
		return 0
	}
	return cur[N2]
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func clip01(p float64) float64 { return math.Min(1, math.Max(0, p)) }

// ChiSquared is the chi-squared test of independence on the counts of
// each category in the reference and current samples (a 2×k contingency
// table), as scipy.stats.chi2_contingency computes it: with Yates'
// continuity correction when the table has one degree of freedom (two
// categories). It also returns the degrees of freedom.
func ChiSquared(reference, current []string) (TestResult, int) {
	counts := map[string][2]float64{}
	for _, v := range reference {
		c := counts[v]
		c[0]++
		counts[v] = c
	}
	for _, v := range current {
		c := counts[v]
		c[1]++
		counts[v] = c
	}
	k := len(counts)
	if k < 2 || len(reference) == 0 || len(current) == 0 {
		return TestResult{Statistic: 0, PValue: 1}, max(k-1, 0)
	}
	rows := [2]float64{float64(len(reference)), float64(len(current))}
	total := rows[0] + rows[1]
	dof := k - 1
	keys := make([]string, 0, k)
	for c := range counts {
		keys = append(keys, c)
	}
	sort.Strings(keys)
	var stat float64
	for _, c := range keys {
		col := counts[c][0] + counts[c][1]
		for r := 0; r < 2; r++ {
			expected := rows[r] * col / total
			observed := counts[c][r]
			if dof == 1 {
				// Yates: move each observation half a count towards its
				// expectation, but not past it.
				diff := expected - observed
				observed += math.Copysign(math.Min(0.5, math.Abs(diff)), diff)
			}
			stat += (observed - expected) * (observed - expected) / expected
		}
	}
	p := distuv.ChiSquared{K: float64(dof)}.Survival(stat)
	return TestResult{Statistic: stat, PValue: clip01(p)}, dof
}

// MMD is the squared maximum mean discrepancy between two samples with the
// Gaussian (RBF) kernel exp(-gamma*(x-y)^2): the biased estimate, mean
// k(x, x') + mean k(y, y') - 2 mean k(x, y). It has no p-value; upstream
// calls it drift above 0.1 with gamma 1.
func MMD(a, b []float64, gamma float64) float64 {
	mean := func(x, y []float64) float64 {
		var s float64
		for _, u := range x {
			for _, v := range y {
				d := u - v
				s += math.Exp(-gamma * d * d)
			}
		}
		return s / float64(len(x)*len(y))
	}
	return mean(a, a) + mean(b, b) - 2*mean(a, b)
}
