package drift

import (
	"math"
)

// KolmogorovSF is P(D_n >= x) for the two-sided one-sample
// Kolmogorov–Smirnov statistic D_n: scipy.stats.kstwo.sf(x, n). It picks
// the method Simard and L'Ecuyer (2011) recommend, as scipy does: closed
// forms near the ends, twice the one-sided probability where the two
// sides cannot both be crossed (x >= 0.5) or hardly can (large n*x*x),
// Durbin's matrix (Marsaglia, Tsang and Wang) for small n*x^1.5, and
// Pelz and Good's expansion otherwise.
func KolmogorovSF(n int, x float64) float64 {
	if n <= 0 || math.IsNaN(x) {
		return math.NaN()
	}
	if x >= 1 {
		return 0
	}
	if x <= 0 {
		return 1
	}
	nf := float64(n)
	t := nf * x
	if t <= 1 {
		// Ruben and Gambino: P(D_n <= x) = n!/n^n (2t-1)^n for 1/2n <= x <= 1/n.
		if t <= 0.5 {
			return 1
		}
		var cdf float64
		if n <= 140 {
			cdf = 1
			for i := 1; i <= n; i++ {
				cdf *= float64(i) / nf * (2*t - 1)
			}
		} else {
			cdf = math.Exp(logFactorialOverPower(nf) + nf*math.Log(2*t-1))
		}
		return clip01(1 - cdf)
	}
	if t >= nf-1 {
		return clip01(2 * math.Pow(1-x, nf))
	}
	if x >= 0.5 {
		return clip01(2 * Smirnov(n, x))
	}
	nxx := t * x
	if n <= 140 {
		if nxx <= 4 {
			return clip01(1 - durbinCDF(n, x))
		}
		return clip01(2 * Smirnov(n, x))
	}
	if nxx >= 370 {
		return 0
	}
	if nxx >= 2.2 {
		return clip01(2 * Smirnov(n, x))
	}
	var cdf float64
	switch {
	case nxx >= 18:
		cdf = 1
	case n <= 100000 && nf*math.Pow(x, 1.5) <= 1.4:
		cdf = durbinCDF(n, x)
	default:
		cdf = pelzGoodCDF(n, x)
	}
	return clip01(1 - cdf)
}

// logFactorialOverPower is log(n!/n^n) by Stirling's series, with
// n*log(n) taken out first so that nothing cancels.
func logFactorialOverPower(n float64) float64 {
	// Stirling's series: B_2j / (2j(2j-1)) for j = 8 down to 1.
	coeffs := []float64{-2.955065359477124183e-2, 6.4102564102564102564e-3,
		-1.9175269175269175269e-3, 8.4175084175084175084e-4,
		-5.952380952380952381e-4, 7.9365079365079365079e-4,
		-2.7777777777777777778e-3, 8.3333333333333333333e-2}
	rn := 1 / n
	u := rn / n
	var poly float64
	for _, c := range coeffs {
		poly = poly*u + c
	}
	return math.Log(n)/2 - n + math.Log(2*math.Pi)/2 + rn*poly
}

// scale bounds the magnitude of intermediate values of the matrix
// algorithm; 2^128.
const (
	scaleExp = 128
)

var (
	scaleUp   = math.Ldexp(1, scaleExp)
	scaleDown = math.Ldexp(1, -scaleExp)
)

// durbinCDF is P(D_n <= d) by Durbin's matrix formula, evaluated as
// Marsaglia, Tsang and Wang do: the k-th diagonal entry of H^n times
// n!/n^n, with H of size 2k-1 where d = (k-h)/n, and powers and factors
// rescaled by 2^128 to stay in range.
func durbinCDF(n int, d float64) float64 {
	if d >= 1 {
		return 1
	}
	nd := float64(n) * d
	if nd <= 0.5 {
		return 0
	}
	k := int(math.Ceil(nd))
	h := float64(k) - nd
	m := 2*k - 1
	H := newMatrix(m)
	// v is the first column and (reversed) the last row; w the
	// factorials' reciprocals.
	v := make([]float64, m)
	w := make([]float64, m)
	fac := 1.0
	for j := 1; j <= m; j++ {
		w[j-1] = fac
		fac /= float64(j)
		v[j-1] = (1 - math.Pow(h, float64(j))) * fac
	}
	tt := math.Pow(math.Max(2*h-1, 0), float64(m)) - 2*math.Pow(h, float64(m))
	v[m-1] = (1 + tt) * fac
	for i := 1; i < m; i++ {
		for r := i - 1; r < m; r++ {
			H.set(r, i, w[r-i+1])
		}
	}
	for r := 0; r < m; r++ {
		H.set(r, 0, v[r])
	}
	for c := 0; c < m; c++ {
		H.set(m-1, c, v[m-1-c])
	}
	P := identity(m)
	expnt, hexpnt := 0, 0
	for nn := n; nn > 0; nn /= 2 {
		if nn%2 == 1 {
			P = P.mul(H)
			expnt += hexpnt
		}
		H = H.mul(H)
		hexpnt *= 2
		if math.Abs(H.at(k-1, k-1)) > scaleUp {
			H.scale(scaleDown)
			hexpnt += scaleExp
		}
	}
	p := P.at(k-1, k-1)
	nf := float64(n)
	for i := 1; i <= n; i++ {
		p = float64(i) * p / nf
		if math.Abs(p) < scaleDown {
			p *= scaleUp
			expnt -= scaleExp
		}
	}
	if expnt != 0 {
		p = math.Ldexp(p, expnt)
	}
	return clip01(p)
}

type matrix struct {
	n int
	a []float64
}

func newMatrix(n int) *matrix { return &matrix{n: n, a: make([]float64, n*n)} }

func identity(n int) *matrix {
	m := newMatrix(n)
	for i := 0; i < n; i++ {
		m.a[i*n+i] = 1
	}
	return m
}

func (m *matrix) at(r, c int) float64     { return m.a[r*m.n+c] }
func (m *matrix) set(r, c int, v float64) { m.a[r*m.n+c] = v }

func (m *matrix) scale(f float64) {
	for i := range m.a {
		m.a[i] *= f
	}
}

func (m *matrix) mul(o *matrix) *matrix {
	n := m.n
	out := newMatrix(n)
	for i := 0; i < n; i++ {
		row := out.a[i*n : (i+1)*n]
		for k := 0; k < n; k++ {
			aik := m.a[i*n+k]
			if aik == 0 {
				continue
			}
			ok := o.a[k*n : (k+1)*n]
			for j := range row {
				row[j] += aik * ok[j]
			}
		}
	}
	return out
}

// pelzGoodCDF is Pelz and Good's approximation of P(D_n <= x): the Li-Chien
// and Korolyuk expansion K0 + K1/sqrt(n) + K2/n + K3/n^1.5 in z = x*sqrt(n),
// each term rewritten with Jacobi's theta identity for small z.
func pelzGoodCDF(n int, x float64) float64 {
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return 1
	}
	nf := float64(n)
	z := math.Sqrt(nf) * x
	z2, z3, z4, z6 := z*z, z*z*z, z*z*z*z, math.Pow(z, 6)
	pi2, pi4, pi6 := math.Pi*math.Pi, math.Pow(math.Pi, 4), math.Pow(math.Pi, 6)
	qlog := -pi2 / 8 / z2
	if qlog < -708 {
		return 0
	}
	q := math.Exp(qlog)
	k1a, k1b := -z2, pi2/4
	k2a := 6*z6 + 2*z4
	k2b := (2*z4 - 5*z2) * pi2 / 4
	k2c := pi4 * (1 - 2*z2) / 16
	k3d := pi6 * (5 - 30*z2) / 64
	k3c := pi4 * (-60*z2 + 212*z4) / 16
	k3b := pi2 * (135*z4 - 96*z6) / 4
	k3a := -30*z6 - 90*math.Pow(z, 8)
	var K [4]float64
	maxk := int(math.Ceil(16 * z / math.Pi))
	// Horner over odd m = 2k-1 of the sums c(m) q^(m^2).
	for k := maxk; k >= 1; k-- {
		m := float64(2*k - 1)
		m2, m4, m6 := m*m, m*m*m*m, math.Pow(m, 6)
		qp := math.Pow(q, float64(8*k))
		c := [4]float64{1, k1a + k1b*m2, k2a + k2b*m2 + k2c*m4, k3a + k3b*m2 + k3c*m4 + k3d*m6}
		for i := range K {
			K[i] = K[i]*qp + c[i]
		}
	}
	sq2pi := math.Sqrt(2 * math.Pi)
	div := [4]float64{z, 6 * z4, 72 * math.Pow(z, 7), 6480 * math.Pow(z, 10)}
	for i := range K {
		K[i] = K[i] * q * sq2pi / div[i]
	}
	// The terms over every integer k of K2 and K3.
	q = math.Exp(-pi2 / 2 / z2)
	var k2extra, k3extra float64
	sqrt3z := math.Sqrt(3) * z
	for k := maxk; k >= 1; k-- {
		kf := float64(k)
		qk := math.Pow(q, kf*kf)
		k2extra += kf * kf * qk
		kpi := math.Pi * kf
		k3extra += (sqrt3z + kpi) * (sqrt3z - kpi) * kf * kf * qk
	}
	K[2] += k2extra * pi2 * sq2pi / (-36 * z3)
	K[3] += k3extra * pi2 * sq2pi / (216 * z6)
	var sum float64
	for i := range K {
		sum += K[i] / math.Pow(nf, float64(i)/2)
	}
	return sum
}

// Smirnov is P(D_n+ >= x), the one-sided Kolmogorov–Smirnov survival
// function (scipy.special.smirnov), by Birnbaum and Tingey's exact sum
//
//	x * sum_{j=0}^{floor(n(1-x))} C(n, j) (1-x-j/n)^(n-j) (x+j/n)^(j-1),
//
// every term taken in logarithms so that huge binomials and tiny powers
// meet without overflow.
func Smirnov(n int, x float64) float64 {
	if x <= 0 {
		return 1
	}
	if x >= 1 {
		return 0
	}
	nf := float64(n)
	lgn, _ := math.Lgamma(nf + 1)
	jmax := int(math.Floor(nf * (1 - x)))
	// The last index can sit exactly on 1-x-j/n = 0, where only n-j = 0
	// leaves a non-zero term.
	var sum float64
	for j := 0; j <= jmax; j++ {
		jf := float64(j)
		a := 1 - x - jf/nf
		if a <= 0 {
			if n-j == 0 {
				lgj, _ := math.Lgamma(jf + 1)
				sum += math.Exp(lgn - lgj + (jf-1)*math.Log(x+jf/nf))
			}
			continue
		}
		lgj, _ := math.Lgamma(jf + 1)
		lgnj, _ := math.Lgamma(nf - jf + 1)
		lt := lgn - lgj - lgnj + (nf-jf)*math.Log(a) + (jf-1)*math.Log(x+jf/nf)
		sum += math.Exp(lt)
	}
	return clip01(x * sum)
}
