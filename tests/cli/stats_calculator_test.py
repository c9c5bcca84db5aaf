#!/usr/bin/env python3
"""`kvaudit stats` against the statistics issue's golden values (tests/golden/statistics).

Runs the real binary for every K* entry (kmax), every certification p-value (certify, grouped by
(n, epsilon)), every two-sided Clopper-Pearson interval (cp), the seed's 29/100 interval (cp
--match), the exact ideal-bootstrap oracles (bootstrap) and the bad-argument exits. Needs only the
standard library. Usage: stats_calculator_test.py KVAUDIT GOLDEN_JSON WORKDIR
"""
import collections
import json
import math
import os
import subprocess
import sys

kvaudit, golden_path, workdir = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(workdir, exist_ok=True)
golden = json.load(open(golden_path))
failures = []


def run(*args, want_rc=0):
    p = subprocess.run([kvaudit, "stats", *map(str, args)], capture_output=True, text=True)
    if p.returncode != want_rc:
        failures.append(f"exit {p.returncode}, wanted {want_rc}: stats {' '.join(map(str, args))}\n"
                        f"  stderr: {p.stderr.strip()}")
        return None
    return p


def close(a, b, rel=1e-10):
    return a == b or abs(a - b) <= rel * max(abs(a), abs(b))


def check(cond, what):
    if not cond:
        failures.append(what)


# kmax: every K* (and its cap), including n where nothing is certifiable (k_star = -1).
nothing = 0
for e in golden["k_star"]:
    p = run("kmax", "--n", e["n"], "--epsilon", repr(e["epsilon"]), "--delta", repr(e["delta"]), "--json")
    if p is None:
        continue
    j = json.loads(p.stdout)
    if e["k_star"] < 0:
        nothing += 1
        check(j["k_star"] is None and j["p_0"] > e["delta"], f"kmax {e}: got {j}")
    else:
        check(j["k_star"] == e["k_star"] and j["p_k_star"] <= e["delta"] < j["p_k_star_plus_1"],
              f"kmax {e}: got {j}")
    check(j["violation_cap"] == e["cap"], f"kmax cap {e}: got {j['violation_cap']}")
check(nothing > 0, "the golden K* table has no uncertifiable case")
print(f"kmax: {len(golden['k_star'])} K* values checked ({nothing} with nothing certifiable)")

# certify: every LTT p-value, one call per (n, epsilon) with all of its counts as candidates.
groups = collections.defaultdict(list)
for e in golden["ltt_p_value"]:
    groups[(e["n"], e["epsilon"])].append(e)
checked = 0
for (n, eps), entries in groups.items():
    ks = ",".join(str(e["k"]) for e in entries)
    p = run("certify", "--n", n, "--epsilon", repr(eps), "--delta", "0.05", "--violations", ks, "--json")
    if p is None:
        continue
    j = json.loads(p.stdout)
    for e, c in zip(entries, j["candidates"]):
        check(c["violations"] == e["k"] and close(c["p_value"], e["p_value"]),
              f"certify p-value n={n} eps={eps} k={e['k']}: {c['p_value']} vs {e['p_value']}")
        checked += 1
print(f"certify: {checked} p-values checked in {len(groups)} calls")
# The fixed sequence: K*, then K*+1 stops it; a first candidate above K* falls back to full KV.
p = run("certify", "--n", 1200, "--epsilon", 0.05, "--delta", 0.05, "--violations", "10,47,48,20", "--json")
if p:
    j = json.loads(p.stdout)
    check(j["selected"] == 2 and [c["certified"] for c in j["candidates"]] == [True, True, False, False]
          and j["candidates"][3]["tested"] is False and j["plug_in"] == 4, f"certify sequence: {j}")
p = run("certify", "--n", 1300, "--epsilon", 0.05, "--delta", 0.05, "--violations", "52,10", "--json")
if p:
    check(json.loads(p.stdout)["selected"] == "full-kv", f"certify fallback: {p.stdout}")

# cp: every two-sided interval of the golden table.
for e in golden["clopper_pearson_two_sided"]:
    p = run("cp", "--x", e["x"], "--n", e["n"], "--alpha", repr(e["alpha"]), "--m", e["m"], "--json")
    if p:
        j = json.loads(p.stdout)
        check(close(j["lower"], e["lower"]) and close(j["upper"], e["upper"]),
              f"cp {e['x']}/{e['n']} alpha={e['alpha']} m={e['m']}: [{j['lower']}, {j['upper']}]")
print(f"cp: {len(golden['clopper_pearson_two_sided'])} intervals checked")
# cp --match: the certification seed's 29/100 -> [14.6%, 47.1%] needs m near 145, not 13.
p = run("cp", "--x", 29, "--n", 100, "--match", "0.146,0.471", "--json")
if p:
    runs = json.loads(p.stdout)["matching_m"]
    check(any(a <= 145 <= b for a, b in runs) and not any(a <= 13 <= b for a, b in runs),
          f"cp --match 29/100: {runs}")
    print(f"cp --match 29/100 -> [0.146, 0.471]: M in {runs}")
p = run("cp", "--x", 29, "--n", 100, "--match", "0.001,0.999")
if p:
    check("no M matches" in p.stdout, f"cp --match impossible: {p.stdout}")

# bootstrap: the exact (enumerated) ideal-bootstrap oracles with one stratum.
oracles = 0
for e in golden["ideal_bootstrap"]:
    if len(e["strata"]) != 1 or not e.get("check_interval"):
        continue
    s = e["strata"][0]
    a = [1] * s["plus"] + [0] * s["minus"] + [0] * s["zero"]
    b = [0] * s["plus"] + [1] * s["minus"] + [0] * s["zero"]
    fa, fb = os.path.join(workdir, "a.txt"), os.path.join(workdir, "b.csv")
    open(fa, "w").write("\n".join(map(str, a)) + "\n")
    open(fb, "w").write("score,other\n" + "".join(f"{v},x\n" for v in b))
    p = run("bootstrap", "--a", fa, "--b", fb, "--resamples", 50000, "--seed", 7, "--json")
    if p is None:
        continue
    j = json.loads(p.stdout)
    se = math.sqrt(e["p_at_or_below_zero"] * (1 - e["p_at_or_below_zero"]) / 50000)
    check(close(j["delta"], e["estimate"], 1e-12), f"bootstrap {e['name']}: delta {j['delta']}")
    check(abs(j["lower"] - e["percentile_95"][0]) < 1e-12 and abs(j["upper"] - e["percentile_95"][1]) < 1e-12,
          f"bootstrap {e['name']}: [{j['lower']}, {j['upper']}] vs {e['percentile_95']}")
    check(abs(j["p_one_sided"] - e["p_at_or_below_zero"]) < 4 * se + 1 / 50001,
          f"bootstrap {e['name']}: p {j['p_one_sided']} vs exact {e['p_at_or_below_zero']}")
    oracles += 1
check(oracles > 0, "no single-stratum ideal-bootstrap oracle in the golden file")
print(f"bootstrap: {oracles} exact oracles checked")

# Bad arguments exit 1 with a message naming the problem.
open(os.path.join(workdir, "short.txt"), "w").write("1\n0\n")
for args, needle in [
    (("kmax", "--n", 0, "--epsilon", 0.05, "--delta", 0.05), "--n must be"),
    (("kmax", "--n", 10, "--epsilon", 1.5, "--delta", 0.05), "--epsilon must lie in (0, 1)"),
    (("kmax", "--n", 10, "--epsilon", 0.05, "--delta", 0), "--delta must lie in (0, 1)"),
    (("cp", "--x", 101, "--n", 100), "--x must lie in [0, n]"),
    (("certify", "--n", 10, "--epsilon", 0.1, "--delta", 0.1, "--violations", "1,x"), "entry 2"),
    (("bootstrap", "--a", os.path.join(workdir, "a.txt"), "--b", os.path.join(workdir, "short.txt")),
     "differ in length"),
    (("median",), "unknown calculation"),
]:
    p = run(*args, want_rc=1)
    if p is not None:
        check(needle in p.stderr, f"stats {' '.join(map(str, args))}: stderr lacks '{needle}': {p.stderr}")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
