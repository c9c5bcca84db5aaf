#!/usr/bin/env python3
"""Golden values for statistics/ (kvaudit issue 6, item 6), from implementations independent of
the C++ code (which uses Boost.Math):

  * binomial tails P{Bin(n, eps) <= k}: exact rational arithmetic (Python integers; eps is the
    exact binary value of the double), cross-checked against scipy.stats.binom.cdf;
  * K*(n, eps, delta) and the LTT p-values: the explicit loop over those exact tails with the cap
    floor(n*eps + 1e-9) (docs/design/statistics.md, "Pitfalls" item 7), cross-checked against the
    equivalent
    "one-sided (1-delta) Clopper-Pearson upper bound <= eps" rule with statsmodels;
  * Clopper-Pearson bounds: mpmath (50 digits) root-finding on binomial tails summed term by
    term (P{Bin(n, p_L) >= x} = a/2, P{Bin(n, p_U) <= x} = a/2),
    cross-checked against statsmodels proportion_confint(method='beta') and
    scipy.stats.binomtest(...).proportion_ci(method='exact');
  * exact McNemar p-values: statsmodels mcnemar(exact=True) (two-sided) and scipy binomtest
    (one-sided);
  * Kendall tau-b and its p-value: scipy.stats.kendalltau (method='auto');
  * ideal-bootstrap (B -> infinity) distributions of small paired 0/1 examples, enumerated exactly
    (rational arithmetic) from the counts of d in {-1, 0, 1}, with the limiting type-7
    percentile endpoints and the one-sided p = P{Delta* <= 0}.

Rerun (from the repository root, with the git-ignored venv of tools/golden/requirements.txt;
mpmath comes with it as a dependency of torch/sympy):
    tools/.venv/bin/python tools/golden/make_statistics_golden.py
It rewrites tests/golden/statistics/statistics_golden.json (deterministic; versions recorded).
"""
import json
import math
import platform
import sys
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import scipy
import scipy.stats as st
import statsmodels
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

mpmath.mp.dps = 50
OUT = Path(__file__).resolve().parents[2] / "tests/golden/statistics/statistics_golden.json"
NS = [20, 50, 59, 100, 1200, 1300, 10000]
EPSILONS = [0.01, 0.05, 0.1, 0.29, 0.57]
DELTAS = [0.01, 0.05, 0.1, 0.4, 0.5]


def rel_close(a, b, tol):
    return a == b or abs(a - b) <= tol * max(abs(a), abs(b))


# ---- exact binomial cdf -------------------------------------------------------------------------
class ExactBinomial:
    """P{Bin(n, eps) <= k} with eps = a / d exactly (the double's binary value); the numerators
    C(n,j) a^j (d-a)^(n-j) are exact integers built by the recurrence
    t_{j+1} = t_j (n-j) a / ((j+1)(d-a)) (an exact integer division)."""

    def __init__(self, n, eps):
        frac = Fraction(eps)  # the exact binary value of the double
        self.n, self.a, self.d = n, frac.numerator, frac.denominator
        self.denominator = self.d**n
        self.terms = [(self.d - self.a) ** n]
        self.partial = [self.terms[0]]

    def numerator(self, k):
        n, a, d = self.n, self.a, self.d
        while len(self.terms) <= k:
            j = len(self.terms) - 1
            num = self.terms[j] * (n - j) * a
            den = (j + 1) * (d - a)
            assert num % den == 0
            self.terms.append(num // den)
            self.partial.append(self.partial[-1] + self.terms[-1])
        return self.partial[k]

    def cdf_float(self, k):
        return self.numerator(k) / self.denominator  # Python int division: correctly rounded

    def cdf_at_most(self, k, bound):
        """Exact test P{Bin <= k} <= bound (bound a double, compared as its exact value)."""
        b = Fraction(bound)
        return self.numerator(k) * b.denominator <= b.numerator * self.denominator


def binomial_section():
    tails, kstar, ltt = [], [], []
    for n in NS:
        for eps in EPSILONS:
            exact = ExactBinomial(n, eps)
            cap = math.floor(n * eps + 1e-9)
            for delta in DELTAS:
                k_star = -1
                for k in range(0, cap):
                    if exact.cdf_at_most(k, delta):
                        k_star = k
                    else:
                        break
                # Cross-check: one-sided (1 - delta) CP upper bound <= eps, i.e. two-sided at 2*delta;
                # only where the guard does not bind (delta well below P{Bin <= cap - 1}).
                if k_star + 1 < cap:
                    cp = -1
                    for k in range(0, cap):
                        if k < n and proportion_confint(k, n, 2 * delta, "beta")[1] <= eps:
                            cp = k
                    assert cp == k_star, (n, eps, delta, cp, k_star)
                kstar.append({"n": n, "epsilon": eps, "delta": delta, "cap": cap,
                              "k_star": k_star})
            ks = sorted({0, 1, 2, cap - 2, cap - 1, cap, cap + 1, n // 2, n - 1, n} & set(range(0, n + 1)))
            for k in ks:
                value = exact.cdf_float(k) if k < n else 1.0
                ref = float(st.binom.cdf(k, n, eps))
                if value > 1e-280:
                    assert rel_close(value, ref, 1e-9), (n, eps, k, value, ref)
                tails.append({"n": n, "p": eps, "k": k, "cdf": value})
                ltt.append({"n": n, "epsilon": eps, "k": k,
                            "p_value": value if k <= cap - 1 else 1.0})
    # Upper tails P{X >= k} = 1 - cdf(k - 1), exact, for the McNemar-style use (p = 1/2) too.
    upper = []
    for n, p, k in [(20, 0.5, 15), (59, 0.5, 40), (100, 0.05, 12), (1200, 0.05, 80), (30, 0.5, 0),
                    (1300, 0.29, 400), (10000, 0.01, 130)]:
        exact = ExactBinomial(n, p)
        value = 1.0 if k == 0 else (exact.denominator - exact.numerator(k - 1)) / exact.denominator
        ref = float(st.binom.sf(k - 1, n, p))
        assert rel_close(value, ref, 1e-9), (n, p, k, value, ref)
        upper.append({"n": n, "p": p, "k": k, "upper_tail": value})
    return tails, upper, kstar, ltt


# ---- Clopper-Pearson ----------------------------------------------------------------------------
def binomial_tail_mp(n, x, p, upper):
    """P{Bin(n, p) >= x} (upper) or P{Bin(n, p) <= x} in mpmath, summing the shorter side by the
    term recurrence t_{k+1} = t_k (n-k)/(k+1) p/q (no hypergeometric series: mpmath's betainc does
    not converge for n = 10000)."""
    p = mpmath.mpf(p)
    q = 1 - p

    def sum_range(lo, hi):  # sum of terms k = lo..hi
        if lo > hi:
            return mpmath.mpf(0)
        term = mpmath.binomial(n, lo) * p**lo * q ** (n - lo)
        total = term
        for k in range(lo, hi):
            term = term * (n - k) / (k + 1) * p / q
            total += term
        return total

    lo, hi = (x, n) if upper else (0, x)
    if hi - lo <= n // 2:
        return sum_range(lo, hi)
    return 1 - (sum_range(0, x - 1) if upper else sum_range(x + 1, n))


def solve_increasing(f, guess):
    """Root of an increasing f near guess (scipy's value): bracket, then the Illinois method."""
    for width in (1e-6, 1e-3, 1e-1):
        lo = mpmath.mpf(guess) * (1 - width)
        hi = min(mpmath.mpf(guess) * (1 + width), mpmath.mpf(1))
        if f(lo) < 0 < f(hi):
            return mpmath.findroot(f, (lo, hi), solver="illinois", tol=mpmath.mpf(10) ** -45)
    raise RuntimeError(f"no bracket near {guess}")


def cp_lower_b(x, n, a):
    """Lower bound at one-sided level a: P{Bin(n, p) >= x} = a; 0 for x = 0."""
    if x == 0:
        return 0.0
    guess = float(st.beta.ppf(a, x, n - x + 1))
    return float(solve_increasing(lambda p: binomial_tail_mp(n, x, p, True) - a, guess))


def cp_upper_b(x, n, a):
    """Upper bound at one-sided level a: P{Bin(n, p) <= x} = a; 1 for x = n."""
    if x == n:
        return 1.0
    guess = float(st.beta.isf(a, x + 1, n - x))
    return float(solve_increasing(lambda p: a - binomial_tail_mp(n, x, p, False), guess))


CROSS_CHECK = {"clopper_pearson_max_relative_difference_vs_statsmodels_scipy": 0.0}


def clopper_pearson_section():
    # scipy's beta.ppf (used by statsmodels and binomtest) is only accurate to ~1e-9 relative in
    # places (e.g. x=1, n=100, a=0.05: 2.5314603268e-4 vs the exact 2.5314603297742e-4 =
    # 1 - 0.975^(1/100)), so the golden bounds are mpmath's and the cross-check tolerance is 1e-7;
    # the largest difference seen is recorded in the output.
    two_sided, one_sided = [], []
    for n in NS:
        xs = sorted({0, 1, n // 10, 29 * n // 100, n // 2, n - 1, n})
        for x in xs:
            for alpha in [0.05, 0.1]:
                for m in [1, 13, 145]:
                    a = alpha / m
                    lo, hi = cp_lower_b(x, n, a / 2), cp_upper_b(x, n, a / 2)
                    sm = proportion_confint(x, n, a, "beta")
                    sc = st.binomtest(x, n).proportion_ci(1 - a, "exact")
                    for mine, ref in ((lo, sm[0]), (lo, sc.low), (hi, sm[1]), (hi, sc.high)):
                        ref = float(ref)
                        assert rel_close(mine, ref, 1e-7), (x, n, a, mine, ref)
                        if mine != ref:
                            key = "clopper_pearson_max_relative_difference_vs_statsmodels_scipy"
                            CROSS_CHECK[key] = max(CROSS_CHECK[key],
                                                   abs(mine - ref) / max(abs(mine), abs(ref)))
                    two_sided.append({"x": x, "n": n, "alpha": alpha, "m": m,
                                      "lower": lo, "upper": hi,
                                      "statsmodels": [float(sm[0]), float(sm[1])],
                                      "scipy": [float(sc.low), float(sc.high)]})
            for alpha in [0.05, 0.01]:
                one_sided.append({"x": x, "n": n, "alpha": alpha,
                                  "lower": cp_lower_b(x, n, alpha), "upper": cp_upper_b(x, n, alpha)})
    return two_sided, one_sided


# ---- McNemar and Kendall ------------------------------------------------------------------------
def mcnemar_section():
    rows = []
    for a_only, b_only in [(0, 0), (5, 0), (0, 5), (3, 7), (7, 3), (10, 10), (15, 4), (30, 45),
                           (1, 1), (60, 40), (200, 170)]:
        table = [[50, a_only], [b_only, 50]]
        two = float(mcnemar(table, exact=True).pvalue) if a_only + b_only > 0 else 1.0
        d = a_only + b_only
        greater = float(st.binomtest(a_only, d, 0.5, "greater").pvalue) if d else 1.0
        less = float(st.binomtest(a_only, d, 0.5, "less").pvalue) if d else 1.0
        if d:
            sc = float(st.binomtest(a_only, d, 0.5).pvalue)
            assert rel_close(two, sc, 1e-12), (a_only, b_only, two, sc)
        rows.append({"a_only": a_only, "b_only": b_only, "p_two_sided": two,
                     "p_greater": greater, "p_less": less})
    return rows


def kendall_section():
    rng = np.random.default_rng(20240601)
    cases = [
        ("no ties n=5", [1, 2, 3, 4, 5], [3, 1, 2, 5, 4]),
        ("perfect n=6", [1, 2, 3, 4, 5, 6], [10, 20, 30, 40, 50, 60]),
        ("reversed n=7", [1, 2, 3, 4, 5, 6, 7], [7, 6, 5, 4, 3, 2, 1]),
        ("ties n=8", [1, 1, 2, 3, 3, 3, 4, 5], [2, 1, 1, 4, 3, 5, 5, 6]),
        ("method ranks sdpa vs eager", [0.61, 0.58, 0.52, 0.47, 0.47, 0.31],
         [0.60, 0.55, 0.53, 0.49, 0.41, 0.33]),
    ]
    x = rng.permutation(30).astype(float); y = x + rng.normal(0, 8, 30)
    cases.append(("no ties n=30", x.tolist(), y.tolist()))
    x = rng.permutation(50).astype(float); y = x + rng.normal(0, 15, 50)
    cases.append(("no ties n=50 (asymptotic)", x.tolist(), y.tolist()))
    x = rng.integers(0, 5, 40).astype(float); y = (x + rng.integers(0, 3, 40)).astype(float)
    cases.append(("ties n=40", x.tolist(), y.tolist()))
    rows = []
    for name, xs, ys in cases:
        r = st.kendalltau(xs, ys)
        rows.append({"name": name, "x": [float(v) for v in xs], "y": [float(v) for v in ys],
                     "tau_b": float(r.statistic), "p_value": float(r.pvalue)})
    return rows


# ---- ideal bootstrap ----------------------------------------------------------------------------
def sum_distribution(plus, zero, minus):
    """Exact distribution of S* = sum of n draws with replacement from d (counts of +1, 0, -1):
    P(S* = s) = sum over (k+, k-) with k+ - k- = s of the multinomial pmf. Returns {s: Fraction}."""
    n = plus + zero + minus
    dist = {}
    for kp in range(n + 1):
        for km in range(n - kp + 1):
            k0 = n - kp - km
            pmf = Fraction(math.factorial(n), math.factorial(kp) * math.factorial(km) * math.factorial(k0)) \
                * Fraction(plus, n) ** kp * Fraction(minus, n) ** km * Fraction(zero, n) ** k0
            if pmf:
                dist[kp - km] = dist.get(kp - km, 0) + pmf
    return dist


def convolve(d1, d2):
    out = {}
    for s1, p1 in d1.items():
        for s2, p2 in d2.items():
            out[s1 + s2] = out.get(s1 + s2, 0) + p1 * p2
    return out


def ideal_quantile(dist, q):
    """B -> infinity limit of the type-7 quantile: min{s : F(s) >= q} when no F(s) equals q.
    Also the margin min |F(s) - q| over the support (how far the endpoint is from a lattice jump)."""
    acc = Fraction(0)
    margin = None
    value = None
    for s in sorted(dist):
        acc += dist[s]
        margin = abs(acc - Fraction(q)) if margin is None else min(margin, abs(acc - Fraction(q)))
        if value is None and acc >= Fraction(q):
            value = s
    return value, float(margin)


def ideal_bootstrap_section():
    rows = []
    # (name, strata as (plus, zero, minus) counts, check_interval). With check_interval the test
    # requires both 95% endpoints to sit >= 7 Monte Carlo SE (0.0049 at B = 50,000) from a lattice
    # jump; these counts were chosen for that (larger n have finer lattices and smaller margins,
    # so the n = 200 example checks the p-value only).
    examples = [
        ("n=20 single stratum", [(5, 13, 2)], True),
        ("n=30 single stratum", [(7, 20, 3)], True),
        ("n=40 single stratum", [(8, 27, 5)], True),
        ("n=60 single stratum", [(9, 47, 4)], True),
        ("two strata 12+16", [(3, 7, 2), (4, 11, 1)], True),
        ("n=200 single stratum (p-value only)", [(31, 150, 19)], False),
    ]
    for name, strata, check_interval in examples:
        dist = None
        n_total = 0
        for plus, zero, minus in strata:
            part = sum_distribution(plus, zero, minus)
            dist = part if dist is None else convolve(dist, part)
            n_total += plus + zero + minus
        estimate = sum(p - m for p, z, m in strata) / n_total
        lo, lo_margin = ideal_quantile(dist, Fraction(25, 1000))
        hi, hi_margin = ideal_quantile(dist, Fraction(975, 1000))
        if check_interval:
            assert min(lo_margin, hi_margin) >= 0.0049, (name, lo_margin, hi_margin)
        p_le0 = sum(p for s, p in dist.items() if s <= 0)
        mean = sum(s * p for s, p in dist.items())
        rows.append({
            "name": name,
            "strata": [{"plus": p, "zero": z, "minus": m} for p, z, m in strata],
            "instances": n_total,
            "estimate": estimate,
            "percentile_95": [lo / n_total, hi / n_total],
            "lattice_margin": [lo_margin, hi_margin],
            "check_interval": check_interval,
            "p_at_or_below_zero": float(p_le0),
            "mean_of_sum": float(mean),
        })
    return rows


def main():
    tails, upper, kstar, ltt = binomial_section()
    two_sided, one_sided = clopper_pearson_section()
    golden = {
        "generator": "tools/golden/make_statistics_golden.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scipy": scipy.__version__, "statsmodels": statsmodels.__version__,
                     "mpmath": mpmath.__version__},
        "binomial_cdf": tails,
        "binomial_upper_tail": upper,
        "k_star": kstar,
        "ltt_p_value": ltt,
        "clopper_pearson_two_sided": two_sided,
        "clopper_pearson_one_sided": one_sided,
        "mcnemar_exact": mcnemar_section(),
        "kendall_tau_b": kendall_section(),
        "ideal_bootstrap": ideal_bootstrap_section(),
        "cross_check": CROSS_CHECK,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    sys.exit(main())
