#!/usr/bin/env python3
"""Golden values for statistics/sequential_test.h (kvaudit issue 17, item 3): the betting wealth
M_t = prod_{i<=t} (1 + lambda_i (eps - x_i)) with the one-sided aGRAPA bet, from confseq 0.0.11
(Waudby-Smith & Ramdas' own package), independent of the C++ code:

  confseq.betting.betting_mart(x, m=eps, theta=0, trunc_scale=1/2,
      lambdas_fn_negative=lambda x, m: np.maximum(0, -lambda_aKelly(x, m)))

theta = 0 selects the "negative" capital process prod (1 - lambda (x - m)) = prod (1 + lambda (m - x)),
which tests H0: E[x] >= m; confseq.betting_strategies.lambda_aKelly is aGRAPA with prior mean 1/2,
prior variance 1/4 and one fake observation (the C++ formula); its sign is flipped and the bet
clipped at 0 (the one-sided test never bets on a larger mean: that bet is not a supermartingale
under the composite null R >= eps), and betting_mart truncates it at trunc_scale/(1 - m) = c/(1 - eps).

The decisions (first t with M_t >= 1/delta; first t with log M_t + (n_max - t) log(1 + eps c/(1 - eps))
< log(1/delta)) are computed here from confseq's wealth.

Sequences are drawn with numpy's PCG64 (seeds below) and stored rounded to 4 decimals, so that C++
reads exactly the same doubles. Wealth is stored at checkpoints to keep the file small.

The preregistered request order of suite/reduce/sequential_calibration.h (Fisher-Yates driven by
Philox4x32-10 keyed by the study seed, counter (i/2, FNV-1a 64 of the block name, "SEQU")) is
recomputed here with a pure-Python Philox4x32-10 (Salmon et al. SC'11; checked against the
Random123 known-answer vector below) for a few (seed, block, n).

Rerun (repository root): tools/.venv/bin/python tools/golden/make_sequential_golden.py
confseq 0.0.11 imports np.float_, removed in NumPy 2; it is aliased to np.float64 below.
"""
import json
import math
import platform
from pathlib import Path

import numpy as np

np.float_ = np.float64  # confseq 0.0.11 still names it
import confseq  # noqa: E402
from confseq.betting import betting_mart  # noqa: E402
from confseq.betting_strategies import lambda_aKelly  # noqa: E402

C = 0.5
OUT = Path(__file__).resolve().parents[2] / "tests/golden/statistics/sequential_golden.json"


def wealth(x, eps):
    return betting_mart(
        np.asarray(x, dtype=float), eps, theta=0, trunc_scale=C,
        lambdas_fn_negative=lambda x, m: np.maximum(0.0, -lambda_aKelly(x, m)))


def case(name, x, eps, delta, n_max):
    x = [round(float(v), 4) for v in x]
    m = wealth(x, eps)
    log_m = np.log(m)
    threshold = math.log(1 / delta)
    best = math.log1p(eps * C / (1 - eps))
    decision, used = "undecided", len(x)
    for t in range(1, len(x) + 1):
        if log_m[t - 1] >= threshold:
            decision, used = "certified", t
            break
        if log_m[t - 1] + (n_max - t) * best < threshold:
            decision, used = "not_certifiable", t
            break
    checkpoints = sorted(set([1, 2, 5, 10, 20, 50, used] + list(range(100, len(x) + 1, 100))))
    checkpoints = [t for t in checkpoints if t <= len(x)]
    return {
        "name": name, "epsilon": eps, "delta": delta, "n_max": n_max, "losses": x,
        "decision": decision, "requests_used": used,
        "log_wealth": {str(t): float(log_m[t - 1]) for t in checkpoints},
    }


M32 = 0xFFFFFFFF


def philox4x32_10(counter, key):
    c = list(counter)
    k0, k1 = key
    for r in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c[3] ^ k1) & M32, p0 & M32]
        k0 = (k0 + 0x9E3779B9) & M32
        k1 = (k1 + 0xBB67AE85) & M32
    return c


# Random123 kat_vectors: philox4x32 10 with counter 243f6a88 85a308d3 13198a2e 03707344,
# key a4093822 299f31d0 gives d16cfe09 94fdcceb 5001e420 24126ea1.
assert philox4x32_10([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
                     [0xA4093822, 0x299F31D0]) == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for b in text.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def request_order(seed, block, n):
    order = list(range(n))
    h = fnv1a64(block)
    key = [seed & M32, seed >> 32]
    for i in range(n - 1, 0, -1):
        w = philox4x32_10([i // 2, h & M32, h >> 32, 0x53455155], key)
        u = (w[1] << 32 | w[0]) if i % 2 == 0 else (w[3] << 32 | w[2])
        j = (u * (i + 1)) >> 64
        order[i], order[j] = order[j], order[i]
    return order


def main():
    cases = []
    cases.append(case("zeros", [0.0] * 200, 0.05, 0.05, 1200))
    rng = np.random.Generator(np.random.PCG64(17001))
    cases.append(case("bernoulli_0.02", (rng.random(1200) < 0.02).astype(float), 0.05, 0.05, 1200))
    rng = np.random.Generator(np.random.PCG64(17002))
    cases.append(case("bernoulli_0.10", (rng.random(1200) < 0.10).astype(float), 0.05, 0.05, 1200))
    rng = np.random.Generator(np.random.PCG64(17003))
    cases.append(case("beta_mean_0.03", rng.beta(1.0, 1 / 0.03 - 1, 1200), 0.05, 0.1, 1200))
    rng = np.random.Generator(np.random.PCG64(17004))
    cases.append(case("bernoulli_0.04_eps0.1", (rng.random(800) < 0.04).astype(float), 0.1, 0.01,
                      1000))
    out = {
        "generator": "tools/golden/make_sequential_golden.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "confseq": getattr(confseq, "__version__", "0.0.11")},
        "bet_cap_c": C,
        "cases": cases,
        "orders": [{"seed": seed, "block": block, "n": n, "order": request_order(seed, block, n)}
                   for seed, block, n in [(12345, "cert-a", 10), ((1 << 40) + 7, "snapkv-ruler", 17),
                                          (0, "b", 1), (2026, "certify \u00e9t\u00e9", 64)]],
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    for c in cases:
        print(c["name"], c["decision"], c["requests_used"])


if __name__ == "__main__":
    main()
