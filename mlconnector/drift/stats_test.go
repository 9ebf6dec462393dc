package drift

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// fixtures are what SciPy says of the samples in testdata (gen.py).
type fixtures struct {
	SciPy      string `json:"scipy"`
	Continuous []struct {
		Name      string    `json:"name"`
		Reference []float64 `json:"reference"`
		Current   []float64 `json:"current"`
		Welch     result    `json:"welch_t"`
		KS        result    `json:"ks"`
		MMD       result    `json:"mmd"`
	} `json:"continuous"`
	Categorical []struct {
		Name      string   `json:"name"`
		Reference []string `json:"reference"`
		Current   []string `json:"current"`
		Chi2      result   `json:"chi2"`
	} `json:"categorical"`
	Kolmogorov []struct {
		N  int     `json:"n"`
		X  float64 `json:"x"`
		SF float64 `json:"sf"`
	} `json:"kolmogorov"`
}

type result struct {
	Statistic float64 `json:"statistic"`
	PValue    float64 `json:"p_value"`
	DOF       int     `json:"dof"`
}

func loadFixtures(t testing.TB) fixtures {
	t.Helper()
	b, err := os.ReadFile("testdata/scipy_fixtures.json")
	if err != nil {
		t.Fatal(err)
	}
	var f fixtures
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// tolerance is how far from SciPy a statistic or p-value may be.
const tolerance = 1e-6

func near(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= tolerance*math.Max(1, math.Abs(b))
}

func TestAgainstSciPy(t *testing.T) {
	f := loadFixtures(t)
	t.Logf("fixtures from SciPy %s", f.SciPy)
	for _, c := range f.Continuous {
		if got := WelchT(c.Reference, c.Current); !near(got.Statistic, c.Welch.Statistic) || !near(got.PValue, c.Welch.PValue) {
			t.Errorf("%s: Welch t = %.12g p = %.12g; SciPy %.12g p = %.12g", c.Name, got.Statistic, got.PValue, c.Welch.Statistic, c.Welch.PValue)
		}
		if got := KS2(c.Reference, c.Current); !near(got.Statistic, c.KS.Statistic) || !near(got.PValue, c.KS.PValue) {
			t.Errorf("%s (n %d, %d): KS D = %.12g p = %.12g; SciPy %.12g p = %.12g", c.Name, len(c.Reference), len(c.Current), got.Statistic, got.PValue, c.KS.Statistic, c.KS.PValue)
		}
		n := min(400, len(c.Reference))
		m := min(400, len(c.Current))
		if got := MMD(c.Reference[:n], c.Current[:m], 1); !near(got, c.MMD.Statistic) {
			t.Errorf("%s: MMD %.12g; NumPy %.12g", c.Name, got, c.MMD.Statistic)
		}
	}
	for _, c := range f.Categorical {
		got, dof := ChiSquared(c.Reference, c.Current)
		if !near(got.Statistic, c.Chi2.Statistic) || !near(got.PValue, c.Chi2.PValue) || dof != c.Chi2.DOF {
			t.Errorf("%s: chi2 = %.12g p = %.12g dof %d; SciPy %.12g p = %.12g dof %d", c.Name, got.Statistic, got.PValue, dof, c.Chi2.Statistic, c.Chi2.PValue, c.Chi2.DOF)
		}
	}
	for _, c := range f.Kolmogorov {
		if got := KolmogorovSF(c.N, c.X); math.Abs(got-c.SF) > tolerance {
			t.Errorf("kstwo.sf(%g, %d) = %.12g; SciPy %.12g", c.X, c.N, got, c.SF)
		}
	}
}
