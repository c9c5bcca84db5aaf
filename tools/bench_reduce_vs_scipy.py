#!/usr/bin/env python3
"""Acceptance timing of `kvaudit reduce` and the same paired bootstrap in scipy, side by side.

    tools/.venv/bin/python tools/bench_reduce_vs_scipy.py \
        --kvaudit build/kvaudit --make-study build/tests/reduce/make_synthetic_study \
        --workdir /tmp/kvaudit-bench [--threads 2] [--resamples 50000] [--scipy-comparisons 216]

1. Writes the acceptance study (make_synthetic_study --preset acceptance: 185,112 records, B =
   50,000 in its manifest) unless --workdir already holds it.
2. Times `kvaudit reduce` on it end to end (wall clock and CPU time of the child), pinned to
   --threads cores with taskset when available, and reads the per-phase times from its log.
3. Reads the same records from the shards (Debian /usr/bin/python3 with h5py, in a subprocess: the
   venv has no h5py), builds the protocol-gap comparisons exactly as reduce does (per model,
   backend, benchmark, method, budget: the query-aware and query-agnostic utilities of each
   instance), and times scipy.stats.bootstrap(paired=True, vectorized=True, method='percentile',
   n_resamples=B, confidence_level=0.95) on them, one comparison after another (scipy has no
   stratified resampling: it resamples the instances of all tasks together; the cost per replicate
   is the same n draws). It checks that scipy's intervals agree with reduce's (protocol_gap.csv) to
   Monte Carlo precision.
4. Prints both timings per comparison (wall clock, and CPU time, which a loaded machine does not
   inflate) and their ratios, and the machine (CPU model, cores, load).
   kvaudit's per-comparison time is the protocol-gap phase divided by its comparisons. Comparisons
   whose paired differences are all equal cost kvaudit almost nothing (those parts are skipped)
   and scipy refuses them, so the "conservative" ratios divide the same phase time by the
   non-degenerate comparisons only (rows with ci_lower != ci_upper), charging them everything.

Needs the venv (scipy 1.17, numpy) for scipy and /usr/bin/python3 with h5py for the shards.
Record the result in docs/PERFORMANCE.md.
"""
import argparse
import csv
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy
from scipy import stats

EXTRACT = r'''
import sys, glob, h5py, numpy as np
out = {k: [] for k in ["model", "backend", "benchmark", "task", "method", "protocol",
                       "compression", "instance", "status", "score"]}
for f in sorted(glob.glob(sys.argv[1] + "/part-*.h5")):
    with h5py.File(f, "r") as h:
        r = h["records"][:]
        enum = lambda col: {v: k for k, v in h5py.check_enum_dtype(r.dtype[col]).items()}
        for col in ["model", "benchmark", "task", "method"]:
            out[col] += [x.decode() if isinstance(x, bytes) else x for x in r[col]]
        for col in ["backend", "protocol", "status"]:
            # Schema 2 calls the attention backend `attention_backend`; schema 1 `backend`.
            member = "attention_backend" if col == "backend" and "attention_backend" in r.dtype.names else col
            names = enum(member)
            out[col] += [names[int(x)] for x in r[member]]
        out["compression"] += list(r["compression"])
        out["instance"] += list(r["instance"])
        out["score"] += list(r["score"])
np.savez(sys.argv[2], **{k: np.array(v) for k, v in out.items()})
'''


def machine():
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{model}; {os.cpu_count()} logical CPUs; load average "
            f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; {platform.platform()}")


def time_reduce(args, results):
    cmd = [args.kvaudit, "reduce", results, "--threads", str(args.threads)]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", ",".join(str(i) for i in range(args.threads))] + cmd
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"kvaudit reduce failed ({p.returncode}):\n{p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    phases = {}
    for line in p.stderr.splitlines():
        m = re.match(r"kvaudit reduce: (.*) \(([0-9.]+) s, cpu ([0-9.]+) s\)$", line)
        if m:
            phases[m.group(1)] = {"wall_s": float(m.group(2)), "cpu_s": float(m.group(3))}
    report = re.search(r"report\s+(\S+)/report.md", p.stdout).group(1)
    return wall, cpu, phases, report


def comparisons(npz):
    with np.load(npz) as z:
        d = {k: z[k].tolist() for k in z.files}  # plain lists: fast scalar access
    keyed = {}
    for i in range(len(d["status"])):
        if d["status"][i] != "ok" or d["method"][i] == "full":
            continue
        key = (d["model"][i], d["backend"][i], d["benchmark"][i], d["method"][i],
               float(d["compression"][i]))
        arm = keyed.setdefault(key, {"query-aware": {}, "query-agnostic": {}})
        arm[d["protocol"][i]][(d["task"][i], int(d["instance"][i]))] = float(d["score"][i])
    out = {}
    for key, arms in keyed.items():
        common = sorted(set(arms["query-aware"]) & set(arms["query-agnostic"]))
        if common:
            out[key] = (np.array([arms["query-aware"][c] for c in common]),
                        np.array([arms["query-agnostic"][c] for c in common]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvaudit", required=True)
    ap.add_argument("--make-study", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--resamples", type=int, default=50000)
    ap.add_argument("--scipy-comparisons", type=int, default=0,
                    help="how many protocol-gap comparisons scipy runs (0: all)")
    args = ap.parse_args()

    load_before = os.getloadavg()
    study = os.path.join(os.path.abspath(args.workdir), "study")
    results = os.path.join(study, "results")
    if not os.path.isdir(results):
        subprocess.run([args.make_study, "--dir", study, "--preset", "acceptance", "--resamples",
                        str(args.resamples)], check=True)
    wall, cpu, phases, report = time_reduce(args, results)
    gap_rows = []
    for table in ("protocol_gap.csv", "protocol_gap_pooled.csv"):
        gap_rows += list(csv.DictReader(open(os.path.join(report, "tables", table))))
    n_gap_all = len(gap_rows)
    n_nondegenerate = sum(1 for r in gap_rows if r["ci_lower"] != r["ci_upper"])
    gap_phase = next(v for k, v in phases.items() if k.startswith("protocol gap"))
    ours_per = gap_phase["wall_s"] / n_gap_all
    ours_cpu_per = gap_phase["cpu_s"] / n_gap_all
    ours_per_conservative = gap_phase["wall_s"] / max(1, n_nondegenerate)
    ours_cpu_per_conservative = gap_phase["cpu_s"] / max(1, n_nondegenerate)

    with tempfile.TemporaryDirectory() as tmp:
        npz = os.path.join(tmp, "records.npz")
        subprocess.run(["/usr/bin/python3", "-c", EXTRACT, os.path.join(results, "shards"), npz],
                       check=True)
        comps = comparisons(npz)
    ours = {}
    for r in csv.DictReader(open(os.path.join(report, "tables", "protocol_gap.csv"))):
        c = float(r["budget"].split("=")[1])
        ours[(r["model"], r["backend"], r["benchmark"], r["method"], c)] = r
    # scipy refuses degenerate data (every difference equal, e.g. a query-independent method whose
    # two protocols agree on every instance): those are not timed on either side's behalf.
    keys = sorted(k for k, (a, b) in comps.items() if not np.all(a - b == (a - b)[0]))
    if args.scipy_comparisons > 0:
        step = max(1, len(keys) // args.scipy_comparisons)
        keys = keys[::step][: args.scipy_comparisons]
    rng = np.random.default_rng(12345)
    diff = lambda x, y, axis=-1: np.mean(x - y, axis=axis)
    worst = 0.0
    t0 = time.perf_counter()
    c0 = time.process_time()
    for key in keys:
        a, b = comps[key]
        res = stats.bootstrap((a, b), diff, paired=True, vectorized=True,
                              n_resamples=args.resamples, method="percentile",
                              confidence_level=0.95, rng=rng, batch=5000)
        lo, hi = res.confidence_interval
        mine = ours[key]
        worst = max(worst, abs(lo - float(mine["ci_lower"])), abs(hi - float(mine["ci_upper"])))
    scipy_wall = time.perf_counter() - t0
    scipy_cpu = time.process_time() - c0
    scipy_per = scipy_wall / len(keys)
    scipy_cpu_per = scipy_cpu / len(keys)

    summary = {
        "machine": machine(),
        "load_average_before": " ".join(f"{x:.1f}" for x in load_before),
        "records": 185112,
        "bootstrap_resamples": args.resamples,
        "threads": args.threads,
        "kvaudit_reduce_wall_s": round(wall, 2),
        "kvaudit_reduce_cpu_s": round(cpu, 2),
        "kvaudit_phases_s": phases,
        "kvaudit_protocol_gap_comparisons": n_gap_all,
        "kvaudit_nondegenerate_comparisons": n_nondegenerate,
        "kvaudit_seconds_per_comparison": round(ours_per, 4),
        "kvaudit_cpu_seconds_per_comparison": round(ours_cpu_per, 4),
        "scipy_version": scipy.__version__,
        "scipy_comparisons": len(keys),
        "scipy_wall_s": round(scipy_wall, 2),
        "scipy_cpu_s": round(scipy_cpu, 2),
        "scipy_seconds_per_comparison": round(scipy_per, 4),
        "scipy_cpu_seconds_per_comparison": round(scipy_cpu_per, 4),
        "ratio_scipy_over_kvaudit_wall_per_comparison": round(scipy_per / ours_per, 1),
        "ratio_scipy_over_kvaudit_cpu_per_comparison": round(scipy_cpu_per / ours_cpu_per, 1),
        "ratio_conservative_wall": round(scipy_per / ours_per_conservative, 1),
        "ratio_conservative_cpu": round(scipy_cpu_per / ours_cpu_per_conservative, 1),
        "max_abs_ci_difference": round(worst, 4),
    }
    print(json.dumps(summary, indent=2))
    print(f"scipy / kvaudit per protocol-gap comparison, same run: "
          f"{summary['ratio_scipy_over_kvaudit_wall_per_comparison']}x wall, "
          f"{summary['ratio_scipy_over_kvaudit_cpu_per_comparison']}x CPU "
          f"(conservative, all phase time on the {n_nondegenerate} non-degenerate comparisons: "
          f"{summary['ratio_conservative_wall']}x wall, {summary['ratio_conservative_cpu']}x CPU); "
          f"kvaudit reduce {summary['kvaudit_reduce_wall_s']} s wall, "
          f"{summary['kvaudit_reduce_cpu_s']} s CPU")
    if worst > 0.03:
        sys.exit(f"scipy's and kvaudit's intervals differ by {worst:.4f}, more than Monte Carlo noise")


if __name__ == "__main__":
    main()
