#!/usr/bin/python3
"""Writes the drift tests' fixtures: samples and what SciPy says of them.

Run with Debian's Python (apt-get install python3-scipy python3-numpy):

    /usr/bin/python3 mlconnector/drift/testdata/gen.py

The Go tests (mlconnector/drift) must match every statistic and p-value
within 1e-6. Samples are rounded to 9 significant digits before SciPy sees
them, so the Go side reads exactly the numbers SciPy used.
"""
import json
import os

import numpy as np
import scipy
from scipy import stats

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scipy_fixtures.json")
rng = np.random.default_rng(20240611)


def r(a):
    return [float("%.9g" % v) for v in a]


def welch(a, b):
    res = stats.ttest_ind(a, b, equal_var=False)
    return {"statistic": float(res.statistic), "p_value": float(res.pvalue)}


def ks(a, b):
    res = stats.ks_2samp(a, b, alternative="two-sided", method="auto")
    return {"statistic": float(res.statistic), "p_value": float(res.pvalue)}


def chi2(ref, cur):
    cats = sorted(set(ref) | set(cur))
    table = np.array([[ref.count(c) for c in cats], [cur.count(c) for c in cats]])
    stat, p, dof, _ = stats.chi2_contingency(table)  # Yates when dof == 1
    return {"statistic": float(stat), "p_value": float(p), "dof": int(dof)}


def mmd(a, b, gamma=1.0):
    a = np.asarray(a)[:, None]
    b = np.asarray(b)[:, None]
    kxx = np.exp(-gamma * (a - a.T) ** 2).mean()
    kyy = np.exp(-gamma * (b - b.T) ** 2).mean()
    kxy = np.exp(-gamma * (a - b.T) ** 2).mean()
    return {"statistic": float(kxx + kyy - 2 * kxy)}


continuous = []
# (name, reference sample, current sample): sizes chosen to cover every
# branch of ks_2samp's 'auto' method: exact with equal and unequal sizes,
# and the asymptotic formula (max size > 10000) with small and large
# effective sizes.
shapes = [
    ("small-equal", rng.normal(0, 1, 12), rng.normal(0.4, 1, 12)),
    ("small-unequal", rng.normal(0, 1, 15), rng.normal(0, 1.5, 22)),
    ("tiny", rng.normal(5, 2, 3), rng.normal(5, 2, 4)),
    ("shifted", rng.normal(0, 1, 200), rng.normal(0.6, 1, 150)),
    ("same", rng.normal(10, 3, 500), rng.normal(10, 3, 400)),
    ("ties", np.round(rng.normal(0, 2, 300)), np.round(rng.normal(0.3, 2, 280))),
    ("wide-exact", rng.exponential(1, 10000), rng.exponential(1.05, 9000)),
    ("asymp-large", rng.normal(0, 1, 10500), rng.normal(0.02, 1, 10400)),
    ("asymp-small-effective", rng.normal(0, 1, 12000), rng.normal(0.5, 1, 60)),
    ("asymp-mid-effective", rng.normal(0, 1, 11000), rng.normal(0.1, 1, 400)),
]
for name, a, b in shapes:
    a, b = r(a), r(b)
    continuous.append({"name": name, "reference": a, "current": b,
                       "welch_t": welch(a, b), "ks": ks(a, b),
                       "mmd": mmd(a[:400], b[:400])})

categorical = []
cats = [
    ("two-categories-yates", ["a"] * 30 + ["b"] * 20, ["a"] * 10 + ["b"] * 25),
    ("three-categories", ["x"] * 50 + ["y"] * 30 + ["z"] * 20, ["x"] * 20 + ["y"] * 30 + ["z"] * 50),
    ("no-drift", ["p"] * 40 + ["q"] * 60, ["p"] * 21 + ["q"] * 29),
    ("new-category", ["m"] * 40 + ["n"] * 40, ["m"] * 10 + ["n"] * 10 + ["o"] * 15),
    ("small-yates", ["u"] * 3 + ["v"] * 2, ["u"] * 1 + ["v"] * 4),
]
for name, a, b in cats:
    categorical.append({"name": name, "reference": a, "current": b, "chi2": chi2(a, b)})

# The two-sided one-sample Kolmogorov distribution, which ks_2samp's
# asymptotic branch evaluates at round(n1*n2/(n1+n2)).
kolmogorov = []
for n in [1, 2, 5, 30, 140, 141, 500, 5000, 50000, 100001]:
    for x in [0.001, 0.01, 0.03, 0.05, 0.1, 0.2, 0.3, 0.45, 0.5, 0.7, 0.95]:
        kolmogorov.append({"n": n, "x": x, "sf": float(stats.kstwo.sf(x, n))})

# End to end (test/integration/mlconnector): the iris training data against
# the LightGBM fixture's reference inputs with petal_length shifted by 3, the
# inputs a model's operations hold when the connector checks its drift.
SERVING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "serving", "testdata")
with open(os.path.join(SERVING, "iris.train.csv")) as f:
    header = f.readline().strip().split(",")
    train = [[float(v) for v in line.strip().split(",")] for line in f if line.strip()]
with open(os.path.join(SERVING, "iris_gbm.reference.json")) as f:
    ref = json.load(f)
shifted = []
for row in ref["inputs"]["input"]:
    shifted.append([v + 3.0 if name == "petal_length" else v for name, v in zip(ref["features"], row)])
iris = {"shift": {"feature": "petal_length", "by": 3.0}, "features": {}}
for j, name in enumerate(ref["features"]):
    a = [row[header.index(name)] for row in train]
    b = [row[j] for row in shifted]
    iris["features"][name] = {"welch_t": welch(a, b), "ks": ks(a, b)}
with open(os.path.join(os.path.dirname(OUT), "iris_shifted.scipy.json"), "w") as f:
    json.dump({"scipy": scipy.__version__, "numpy": np.__version__, **iris}, f, indent=1)

with open(OUT, "w") as f:
    json.dump({"scipy": scipy.__version__, "numpy": np.__version__,
               "continuous": continuous, "categorical": categorical,
               "kolmogorov": kolmogorov}, f, separators=(",", ":"))
print("wrote", OUT)
