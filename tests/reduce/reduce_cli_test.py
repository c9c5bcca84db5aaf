#!/usr/bin/env python3
"""End-to-end test of `kvaudit reduce` on a synthetic study with planted effects.

Checks, through the kvaudit binary: exit codes (0 complete, 3 partial, 1 refused), that h5py reads
summary.h5 (tables as compound datasets, family/m/B/seed/quantile attributes, strings as str,
flags as bool), that the protocol-gap intervals in it cover the planted gap, that the figures are
valid PNG and SVG, that the LaTeX tables are booktabs, that a rerun never overwrites, that a
changed manifest is refused naming both hashes, and that a deleted shard shows up as missing cells
and partial numbers.

Usage: reduce_cli_test.py --kvaudit BIN --make-study BIN --workdir DIR
Runs under Debian's /usr/bin/python3 (h5py, numpy). Exit 0 = pass, 77 = skipped (printed why).
"""
import argparse
import csv
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

import h5py
import numpy as np

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvaudit", required=True)
    ap.add_argument("--make-study", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    work = os.path.abspath(a.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    study = os.path.join(work, "study")
    truth_file = os.path.join(work, "truth.json")
    p = run([a.make_study, "--dir", study, "--truth", truth_file, "--resamples", "1000"])
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        return 1
    results = os.path.join(study, "results")
    truth = json.load(open(truth_file))

    # 1. A complete study: exit 0, a report.
    p = run([a.kvaudit, "reduce", results, "--threads", "2"])
    check(p.returncode == 0, f"complete study: exit {p.returncode}, wanted 0: {p.stderr[-500:]}")
    check("coverage   30720 of 30720 preregistered cells recorded" in p.stdout, "coverage line")
    report = os.path.join(results, "report")
    check(os.path.isfile(os.path.join(report, "report.md")), "report.md written")

    # 2. summary.h5 through h5py.
    with h5py.File(os.path.join(report, "summary.h5"), "r") as f:
        check(f.attrs["manifest_sha256"] == json.load(open(os.path.join(results, "prereg.json")))["manifest_sha256"],
              "summary.h5 carries the locked manifest hash")
        for name in ["coverage", "missing_cells", "certification", "certification_candidates",
                     "certification_task_risk", "protocol_gap", "protocol_gap_pooled",
                     "baseline_wins", "baseline_win_counts", "backend_confound",
                     "backend_rankings", "accuracy", "accuracy_by_budget"]:
            check(name in f["tables"], f"summary.h5 has tables/{name}")
        ds = f["tables/protocol_gap"]
        check(ds.attrs["family"] == "protocol-gap", "protocol_gap family attribute")
        check(ds.attrs["m"] == "60", f"protocol_gap m attribute is {ds.attrs['m']!r}")
        check(ds.attrs["bootstrap_resamples"] == "1000", "B attribute")
        check(ds.attrs["bootstrap_seed"] == "11", "seed attribute")
        check("type 7" in ds.attrs["quantile_rule"], "quantile rule attribute")
        rows = ds[:]
        check(len(rows) == 60, f"protocol_gap has {len(rows)} rows")
        check(rows.dtype["partial"] == np.bool_, f"flags read as bool ({rows.dtype['partial']})")
        # Variable-length UTF-8 members come back as bytes inside a compound (h5py 3.7).
        def text(col):
            return [v.decode("utf-8") if isinstance(v, bytes) else v for v in rows[col]]
        method, model, backend = text("method"), text("model"), text("backend")
        check(h5py.check_string_dtype(rows.dtype["method"]).encoding == "utf-8",
              "string members are UTF-8")
        for i in range(len(rows)):
            gap = truth["methods"][method[i]]["gap"]
            t = truth["p_full"][model[i]][backend[i]] * gap
            lo, hi = rows["family_lower"][i], rows["family_upper"][i]
            check(lo <= t <= hi, f"family interval [{lo}, {hi}] covers the planted gap {t} "
                                 f"({model[i]} {backend[i]} {method[i]})")
            check(not rows["partial"][i], "complete study has no partial row")
        cert = f["tables/certification"][:]
        check(len(cert) == 4, "certification rows: 2 blocks x 2 models")

    # 3. Figures: valid PNG and SVG.
    figures = os.path.join(report, "figures")
    pngs = sorted(x for x in os.listdir(figures) if x.endswith(".png"))
    if shutil.which("gnuplot") is None:
        print("SKIP (figures): gnuplot is not installed; install gnuplot-nox")
    else:
        check(len(pngs) == 12, f"{len(pngs)} PNG figures, wanted 12")
        for name in pngs:
            data = open(os.path.join(figures, name), "rb").read()
            check(data[:8] == b"\x89PNG\r\n\x1a\n", f"{name} has the PNG signature")
            w, h = struct.unpack(">II", data[16:24])
            check(w >= 600 and h >= 400, f"{name} is {w}x{h}")
            svg = os.path.join(figures, name[:-4] + ".svg")
            root = ET.parse(svg).getroot()
            check(root.tag.endswith("svg"), f"{svg} parses as SVG")
        check(any(n.startswith("risk_") for n in pngs), "a risk-vs-retention figure")
        check(any(n.startswith("gap_pooled_") for n in pngs), "a pooled protocol-gap figure")
        check(any(n.startswith("accuracy_") for n in pngs), "an accuracy-vs-compression figure")

    # 4. LaTeX: booktabs, escaped.
    tex = open(os.path.join(report, "tables", "protocol_gap_pooled.tex")).read()
    for needle in ["\\toprule", "\\midrule", "\\bottomrule", "streaming\\_llm", "$m = 10$"]:
        check(needle in tex, f"protocol_gap_pooled.tex contains {needle}")

    # 5. A rerun goes to report-2; the first report is untouched.
    before = open(os.path.join(report, "report.md")).read()
    p = run([a.kvaudit, "reduce", results, "--no-figures", "--threads", "1"])
    check(p.returncode == 0, f"rerun exit {p.returncode}")
    check("report-2/report.md" in p.stdout, "rerun reports report-2")
    check(open(os.path.join(report, "report.md")).read() == before, "first report untouched")
    a_csv = open(os.path.join(report, "tables", "protocol_gap.csv")).read()
    b_csv = open(os.path.join(results, "report-2", "tables", "protocol_gap.csv")).read()
    check(a_csv == b_csv, "1 and 2 threads give the same protocol_gap.csv")

    # 6. A changed manifest is refused: exit 1, both hashes, nothing written.
    locked = json.load(open(os.path.join(results, "prereg.json")))["manifest_sha256"]
    changed = os.path.join(study, "changed.toml")
    text = open(os.path.join(study, "manifest.toml")).read()
    open(changed, "w").write(text.replace("bootstrap_resamples = 1000", "bootstrap_resamples = 999"))
    p = run([a.kvaudit, "reduce", results, "--manifest", changed])
    check(p.returncode == 1, f"changed manifest: exit {p.returncode}, wanted 1")
    hashes = re.findall(r"[0-9a-f]{64}", p.stderr)
    check(locked in hashes and len(set(hashes)) == 2, f"refusal names both hashes: {p.stderr}")
    check("Nothing was written" in p.stderr, "refusal says nothing was written")
    check(not os.path.exists(os.path.join(results, "report-3")), "no report after a refusal")

    # 7. A deleted shard: exit 3, missing cells listed, numbers partial.
    shards = sorted(os.listdir(os.path.join(results, "shards")))
    os.remove(os.path.join(results, "shards", shards[0]))
    p = run([a.kvaudit, "reduce", results, "--no-figures"])
    check(p.returncode == 3, f"deleted shard: exit {p.returncode}, wanted 3: {p.stderr[-300:]}")
    check("PARTIAL" in p.stdout, "stdout says PARTIAL")
    r3 = os.path.join(results, "report-3")
    missing = list(csv.DictReader(open(os.path.join(r3, "tables", "missing_cells.csv"))))
    check(len(missing) > 0, "missing cells listed")
    md = open(os.path.join(r3, "report.md")).read()
    check("**PARTIAL.**" in md, "report.md says PARTIAL")
    gap = list(csv.DictReader(open(os.path.join(r3, "tables", "protocol_gap.csv"))))
    check(any(r["partial"] == "true" for r in gap), "protocol_gap rows marked partial")
    tex = open(os.path.join(r3, "tables", "protocol_gap.tex")).read()
    check("$^\\dagger$" in tex, "LaTeX marks partial rows")

    # 8. No lock: exit 1.
    p = run([a.kvaudit, "reduce", os.path.join(work, "nothing")])
    check(p.returncode == 1 and "prereg.json" in p.stderr, "a directory without a lock is refused")

    print(f"{'FAILED' if FAILURES else 'passed'}: {len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
