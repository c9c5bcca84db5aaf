#!/usr/bin/env python3
"""Golden values for the bounded-loss risks, the multiple-testing procedures and the power /
sample-size planning of statistics/ (kvaudit issue 17), from implementations independent of the
C++ code. Every value records the package, version and function that produced it:

  * Hoeffding-Bentkus p-values: MAPIE (mapie.risk_control.methods.compute_hoeffding_bentkus_p_value,
    the LTT p^HB; its Bentkus term is scipy.stats.binom.cdf) and, as a second reference, mpmath
    (60 digits) evaluating the same formula with the exact binary values of r_hat and alpha and the
    binomial tail summed term by term. The two differ only where MAPIE's np.ceil(n * r_hat) lands
    one above the count (r_hat = K/n is not exact in double: 7/100*100 = 7.000000000000001); the
    C++ code takes ceil(n*r_hat - 1e-9) (statistics/bounded_loss.h), as the mpmath reference does.
    Rows record both counts (k_mapie, k_exact).
  * WSR betting bounds (one-sided, predictable plug-in bets for a fixed n), on seeded loss vectors
    stored here:
      - confseq (confseq.betting.betting_mart with theta=0, lambda_predmix_eb(fixed_n=n),
        trunc_scale=1, m_trunc=False): the capital process at exact points, giving the p-value
        min(1, 1/max_t K_t(alpha)) (exact up to floating point), and the upper bound as the root of
        log max_t K_t(m) = log(1/delta) found with scipy.optimize.brentq (xtol 1e-14; the RCPS
        reference code github.com/aangelopoulos/rcps core/bounds.py WSR_mu_plus solves the same
        equation with brentq);
      - confseq.betting.betting_cs (grid of `breaks` points, running intersection): its upper
        bound u is the largest grid m in the set plus 1/breaks, so u - 1/breaks <= u* <= u;
      - MAPIE (mapie.risk_control.methods.get_r_hat_plus(method="rcps", bound="wsr",
        sigma_init=0.25)): the smallest point of its lambda grid whose capital exceeds 1/delta.
        MAPIE differs from the construction in two ways: R is restricted to the grid, and the
        running maximum is taken separately over the two halves of the sequence and the two maxima
        (of log-capital) added; the difference is recorded per vector (mapie_minus_exact).
  * multiple-testing procedures: MAPIE (mapie.risk_control.fwer_control.control_fwer with
    "fixed_sequence", "bonferroni", "bonferroni_holm", and FWERFixedSequenceTesting(n_starts=S)):
    the rejected indices for seeded p-value vectors (with values exactly at the levels).
  * power P{Bin(n, r) <= K*(n, eps, delta)}: K* from the existing definition (exact rational tails
    with the cap floor(n*eps + 1e-9), ExactBinomial of make_statistics_golden.py), the power from
    scipy.stats.binom.cdf and from mpmath (exact sum, 60 digits); sample size by scanning every n in
    [1, n_max] with scipy.stats.binom.cdf (decisions within 1e-9 of a threshold re-decided
    exactly).

Rerun (from the repository root, with the git-ignored venv of tools/golden/requirements.txt):
    tools/.venv/bin/python tools/golden/make_risk_control_golden.py
It rewrites tests/golden/statistics/risk_control_golden.json (deterministic; versions recorded).
"""
import importlib.metadata
import json
import math
import platform
import sys
import warnings
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np

# confseq 0.0.11 annotates with np.float_, which NumPy 2 removed (an AttributeError at import);
# the alias is only used in type annotations of confseq.misc.
if not hasattr(np, "float_"):
    np.float_ = np.float64
import scipy
import scipy.stats as st
from confseq.betting import betting_cs, betting_mart
from confseq.betting_strategies import lambda_predmix_eb
from mapie.risk_control.fwer_control import FWERFixedSequenceTesting, control_fwer
from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value, get_r_hat_plus
from scipy.optimize import brentq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_statistics_golden import ExactBinomial  # noqa: E402  (K* by the existing definition)

mpmath.mp.dps = 60
OUT = Path(__file__).resolve().parents[2] / "tests/golden/statistics/risk_control_golden.json"


def version(name):
    return importlib.metadata.version(name)


def rel_diff(a, b):
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b))


# ---- Hoeffding-Bentkus ---------------------------------------------------------------------------
def hb_mpmath(r_hat, n, alpha):
    """p^HB with the exact binary values of r_hat and alpha; k = ceil(n*r_hat - 1e-9) exactly."""
    r = mpmath.mpf(Fraction(r_hat).numerator) / Fraction(r_hat).denominator
    a = mpmath.mpf(Fraction(alpha).numerator) / Fraction(alpha).denominator
    m = min(r, a)
    h1 = (m * mpmath.log(m / a) if m != 0 else 0) + (1 - m) * mpmath.log((1 - m) / (1 - a))
    hoeffding = mpmath.exp(-n * h1)
    k = math.ceil(Fraction(r_hat) * n - Fraction(1, 10**9))
    k = min(max(k, 0), n)
    term = (1 - a) ** n
    total = term
    for j in range(k):
        term = term * (n - j) / (j + 1) * a / (1 - a)
        total += term
    bentkus = mpmath.e * total
    return min(hoeffding, bentkus), hoeffding, bentkus, k


def hb_section():
    rows = []
    ns = [10, 37, 100, 1200, 5000]
    alphas = [0.01, 0.05, 0.1, 0.2, 0.5]
    for n in ns:
        for alpha in alphas:
            r_hats = {0.0, 1.0, 0.013, 0.0371, 0.1, 0.25, 0.5, alpha * 0.5, alpha * 0.9, alpha}
            for k in {0, 1, 2, 7, n // 20, n // 10, int(n * alpha) - 1, int(n * alpha), n // 2}:
                if 0 <= k <= n:
                    r_hats.add(k / n)
            for r_hat in sorted(r_hats):
                p_mp, h_mp, b_mp, k_exact = hb_mpmath(r_hat, n, alpha)
                p_mapie = float(
                    compute_hoeffding_bentkus_p_value(np.array([r_hat]), n, alpha)[0][0])
                k_mapie = int(np.ceil(n * r_hat))
                value = float(p_mp)
                if k_mapie == k_exact and value > 1e-290:
                    assert rel_diff(value, p_mapie) < 1e-9, (r_hat, n, alpha, value, p_mapie)
                rows.append({"r_hat": r_hat, "n": n, "alpha": alpha, "p_value": value,
                             "hoeffding": float(h_mp), "bentkus": float(b_mp),
                             "k_exact": k_exact, "k_mapie": k_mapie, "p_value_mapie": p_mapie,
                             "mapie_agrees": k_mapie == k_exact})
    return rows


# ---- WSR ----------------------------------------------------------------------------------------
def loss_vectors():
    rng = np.random.default_rng(20260417)
    vectors = {
        "beta_1_9_n50": rng.beta(1, 9, size=50),
        "bernoulli_0.05_n200": (rng.random(200) < 0.05).astype(float),
        "zero_inflated_n200": np.where(rng.random(200) < 0.8, 0.0, rng.random(200)),
        "beta_2_5_n500": rng.beta(2, 5, size=500),
        "all_zero_n30": np.zeros(30),
        "high_n8": rng.uniform(0.6, 1.0, size=8),
    }
    # Round to 12 digits so that the JSON text is the exact double on both sides.
    return {k: [float(round(v, 12)) for v in x] for k, x in vectors.items()}


def confseq_capital(x, m, delta):
    """confseq's one-sided (negative) capital process K_t(m), t = 1..n, bets tuned at delta."""
    n = len(x)
    return betting_mart(np.asarray(x), m, alpha=delta,
                        lambdas_fn_positive=lambda x_, m_: lambda_predmix_eb(x_, alpha=delta,
                                                                             fixed_n=n),
                        lambdas_fn_negative=lambda x_, m_: lambda_predmix_eb(x_, alpha=delta,
                                                                             fixed_n=n),
                        theta=0, trunc_scale=1, m_trunc=False)


def confseq_log_max(x, m, delta):
    with np.errstate(divide="ignore"):
        return max(0.0, float(np.max(np.log(confseq_capital(x, m, delta)))))


def wsr_section():
    out = []
    breaks = 4000
    grid = np.round(np.arange(0, 201) / 200, 12)  # MAPIE's lambda grid (step 0.005)
    for name, x in loss_vectors().items():
        arr = np.asarray(x)
        n = len(x)
        for delta in [0.05, 0.1]:
            threshold = math.log(1 / delta)
            if confseq_log_max(x, 1.0, delta) < threshold:
                exact = 1.0
            else:
                exact = brentq(lambda m: confseq_log_max(x, m, delta) - threshold, 0.0, 1.0,
                               xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)
            bets = [lambda x_, m_: lambda_predmix_eb(x_, alpha=delta, fixed_n=n)]
            _, u_cs = betting_cs(arr, lambdas_fns_positive=bets, lambdas_fns_negative=bets,
                                 alpha=delta, breaks=breaks, running_intersection=True, theta=0,
                                 trunc_scale=1, m_trunc=False)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                risks = np.repeat(arr[:, None], len(grid), axis=1)
                _, plus = get_r_hat_plus(risks, grid, "rcps", "wsr", delta, 0.25)
            # Does MAPIE's split (sum of the two halves' running maxima) decide any grid point
            # differently from the whole-sequence maximum? (computed from confseq's capital)
            half = n // 2
            split_differs = []
            for m in grid:
                with np.errstate(divide="ignore", invalid="ignore"):
                    logk = np.log(confseq_capital(x, float(m), delta))
                    # MAPIE's batches: range(n // 2) and range(n - n // 2, n).
                    second = logk[n - half:] - (logk[n - half - 1] if n - half > 0 else 0.0)
                whole = logk.max() > threshold
                split = (logk[:half].max() if half > 0 else 0.0) + second.max() > threshold
                if whole != split:
                    split_differs.append(float(m))
            p_rows = []
            for alpha in [0.02, 0.05, 0.1, 0.2, 0.3, 0.5]:
                log_max = confseq_log_max(x, alpha, delta)
                p_rows.append({"alpha": alpha, "bet_delta": delta,
                               "p_value": min(1.0, math.exp(-log_max)),
                               "log_capital": log_max})
            out.append({"name": name, "losses": x, "delta": delta,
                        "upper_bound_confseq_brentq": exact, "brentq_xtol": 1e-14,
                        "upper_bound_confseq_grid": float(u_cs[-1]), "confseq_breaks": breaks,
                        "upper_bound_mapie_grid": float(plus[0]), "mapie_grid_step": 0.005,
                        "mapie_minus_exact": float(plus[0]) - exact,
                        "mapie_split_decides_differently_at": split_differs,
                        "p_values": p_rows})
    return out


# ---- procedures ---------------------------------------------------------------------------------
def procedures_section():
    rng = np.random.default_rng(917)
    rows = []
    for case in range(40):
        j = int(rng.choice([1, 2, 5, 8, 10, 12]))
        delta = float(rng.choice([0.05, 0.1]))
        p = np.where(rng.random(j) < 0.6, rng.random(j) * 2 * delta / max(1, j // 2), rng.random(j))
        # Values exactly at the levels (inclusive comparisons).
        if j >= 3 and case % 3 == 0:
            p[0] = delta
            p[1] = delta / j
        p = [float(v) for v in p]
        entry = {"p_values": p, "delta": delta,
                 "fixed_sequence": control_fwer(np.array(p), delta, "fixed_sequence").tolist(),
                 "bonferroni": control_fwer(np.array(p), delta, "bonferroni").tolist(),
                 "holm": control_fwer(np.array(p), delta, "bonferroni_holm").tolist(),
                 "multistart": {}}
        for starts in range(1, j + 1):
            entry["multistart"][str(starts)] = control_fwer(
                np.array(p), delta, FWERFixedSequenceTesting(n_starts=starts)).tolist()
        rows.append(entry)
    return rows


# ---- power and sample size ----------------------------------------------------------------------
def k_star_exact(n, eps, delta):
    exact = ExactBinomial(n, eps)
    cap = math.floor(n * eps + 1e-9)
    k_star = -1
    for k in range(0, cap):
        if exact.cdf_at_most(k, delta):
            k_star = k
        else:
            break
    return k_star


def power_mp(n, rate, k):
    r = mpmath.mpf(Fraction(rate).numerator) / Fraction(rate).denominator
    term = (1 - r) ** n
    total = term
    for j in range(k):
        term = term * (n - j) / (j + 1) * r / (1 - r)
        total += term
    return total


def power_section():
    rows = []
    for n, eps, delta, rate in [(1200, 0.05, 0.05, 0.03), (1200, 0.05, 0.05, 0.0),
                                (1200, 0.05, 0.05, 0.05), (1200, 0.05, 0.05, 0.2),
                                (100, 0.1, 0.05, 0.02), (50, 0.05, 0.05, 0.01),
                                (2000, 0.05, 0.1, 0.04), (500, 0.2, 0.01, 0.1),
                                (5000, 0.01, 0.05, 0.005), (10, 0.05, 0.05, 0.01),
                                (1300, 0.29, 0.4, 0.25), (3000, 0.05, 0.05, 0.035)]:
        k = k_star_exact(n, eps, delta)
        scipy_value = float(st.binom.cdf(k, n, rate)) if k >= 0 else 0.0
        mp_value = float(power_mp(n, rate, k)) if k >= 0 else 0.0
        assert rel_diff(scipy_value, mp_value) < 1e-9, (n, eps, delta, rate, scipy_value, mp_value)
        rows.append({"n": n, "epsilon": eps, "delta": delta, "rate": rate, "k_star": k,
                     "power": mp_value, "power_scipy": scipy_value})
    return rows


def k_star_curve(eps, delta, n_max):
    """K*(n) for n = 1..n_max: scipy cdf, with exact re-decisions near delta."""
    ks = np.zeros(n_max + 1, dtype=np.int64)
    for n in range(1, n_max + 1):
        cap = math.floor(n * eps + 1e-9)
        if cap < 1:
            ks[n] = -1
            continue
        cdf = st.binom.cdf(np.arange(cap), n, eps)
        ok = cdf <= delta
        near = np.abs(cdf - delta) <= 1e-9 * delta
        if near.any():
            exact = ExactBinomial(n, eps)
            for k in np.flatnonzero(near):
                ok[k] = exact.cdf_at_most(int(k), delta)
        # p is non-decreasing in K: K* is the last K of the leading run of True.
        ks[n] = (int(np.argmin(ok)) if not ok.all() else cap) - 1
    return ks


def sample_size_section():
    rows = []
    for eps, delta, rate, target, n_max in [(0.05, 0.05, 0.03, 0.8, 4000),
                                            (0.1, 0.05, 0.05, 0.9, 2000),
                                            (0.05, 0.1, 0.02, 0.8, 2000),
                                            (0.2, 0.01, 0.1, 0.5, 1000),
                                            (0.05, 0.05, 0.0, 0.99, 500),
                                            (0.05, 0.05, 0.045, 0.8, 600)]:
        ks = k_star_curve(eps, delta, n_max)
        ns = np.arange(1, n_max + 1)
        power = np.where(ks[1:] >= 0, st.binom.cdf(np.maximum(ks[1:], 0), ns, rate), 0.0)
        near = np.abs(power - target) <= 1e-9
        assert not near.any(), (eps, delta, rate, target)  # no decision within rounding
        reach = power >= target
        row = {"epsilon": eps, "delta": delta, "rate": rate, "target_power": target,
               "n_max": n_max, "found": bool(reach.any()),
               "power_at_n_max": float(power[-1])}
        if reach.any():
            first = int(np.argmax(reach))
            row.update({"n": first + 1, "power": float(power[first]), "k_star": int(ks[first + 1])})
        if reach[-1]:
            below = np.flatnonzero(~reach)
            stable = int(below[-1]) + 1 if len(below) else 0
            row.update({"stable_n": stable + 1, "stable_power": float(power[stable]),
                        "stable_k_star": int(ks[stable + 1])})
        else:
            row.update({"stable_n": 0})
        drops = power[:-1] - power[1:]
        worst = int(np.argmax(drops))
        row["largest_drop"] = {"n": worst + 1, "power_n": float(power[worst]),
                               "power_n_plus_1": float(power[worst + 1])}
        rows.append(row)
    return rows


def main():
    hb = hb_section()
    golden = {
        "generator": "tools/golden/make_risk_control_golden.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scipy": scipy.__version__, "mpmath": mpmath.__version__,
                     "mapie": version("mapie"), "confseq": version("confseq")},
        "sources": {
            "hoeffding_bentkus": "p_value: mpmath (60 digits) of the LTT p^HB formula; "
                                 "p_value_mapie: mapie.risk_control.methods."
                                 "compute_hoeffding_bentkus_p_value",
            "wsr": "upper_bound_confseq_brentq: scipy.optimize.brentq on log max_t of "
                   "confseq.betting.betting_mart (theta=0, lambda_predmix_eb fixed_n=n); "
                   "upper_bound_confseq_grid: confseq.betting.betting_cs; upper_bound_mapie_grid: "
                   "mapie.risk_control.methods.get_r_hat_plus(method='rcps', bound='wsr'); "
                   "p_values: 1/max_t betting_mart",
            "procedures": "mapie.risk_control.fwer_control.control_fwer and "
                          "FWERFixedSequenceTesting(n_starts)",
            "power": "K*: exact rational tails (make_statistics_golden.ExactBinomial); power: "
                     "mpmath exact sum, cross-checked with scipy.stats.binom.cdf",
            "sample_size": "scan of n = 1..n_max with scipy.stats.binom.cdf",
        },
        "hoeffding_bentkus": hb,
        "wsr": wsr_section(),
        "procedures": procedures_section(),
        "power": power_section(),
        "sample_size": sample_size_section(),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    disagree = sum(1 for r in hb if not r["mapie_agrees"])
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes); HB rows {len(hb)}, "
          f"MAPIE ceil differs in {disagree}")
    for w in golden["wsr"]:
        print(f"  wsr {w['name']} delta={w['delta']}: brentq {w['upper_bound_confseq_brentq']:.12f}"
              f" confseq grid {w['upper_bound_confseq_grid']:.6f}"
              f" mapie grid {w['upper_bound_mapie_grid']:.4f}"
              f" (mapie - exact {w['mapie_minus_exact']:+.4f};"
              f" split differs at {len(w['mapie_split_decides_differently_at'])} grid points)")
    for s in golden["sample_size"]:
        print("  sample size", s)


if __name__ == "__main__":
    sys.exit(main())
