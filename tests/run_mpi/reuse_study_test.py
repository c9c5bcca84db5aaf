#!/usr/bin/python3
"""A reuse study end to end under a real mpirun (issue 19, the reuse protocol's acceptance).

A tiny study on SmolLM2-135M-Instruct: RULER niah_multiquery at 512 tokens in its multi-question
form (one haystack, four needles, one question per needle), 2 contexts, snapkv at one ratio +
full KV, protocols query-agnostic and reuse, sdpa. Then:

1. `kvaudit plan` prints the reuse units and writes the lock;
2. `mpirun -np 2 kvaudit run` completes (exit 0);
3. the shards, read back with h5py: every reuse cell has exactly the records of questions 0..3,
   each with n_questions 4, the Protocol enum member "reuse" (stored 2), one kept set (equal
   kept_digest and kept_bytes) but four prompts (distinct prompt_digest), and its select / evict
   times marked as shared by its questions (shared_costs bits 5 and 6; the full-KV cell has no
   selection); every query-agnostic record is question 0 of 1;
4. a second `mpirun -np 2 kvaudit run` finds every cell done (a reuse cell counts as done only
   with all its questions) and records nothing;
5. `kvaudit reduce` completes, counts the reuse records and states under its tables that the
   intervals resample contexts (cluster bootstrap).

Usage: reuse_study_test.py --kvaudit BIN --mpiexec MPIEXEC --model GGUF --workdir DIR
Exit 0 = pass, 77 = skipped (the reason is printed), 1 = failure.
"""
import argparse
import collections
import glob
import os
import shutil
import subprocess
import sys

import h5py

FAILURES = []


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


MANIFEST = """# Tiny reuse study for tests/run_mpi/reuse_study_test.py.
[study]
name = "reuse-study-test"
seed = 11
output_dir = "results"

[[models]]
name = "smollm2-135m-instruct"
path = "{model}"
format = "gguf"
chat_template = "chatml"
dtype = "f32"

[[benchmarks]]
name = "ruler-512-multiquery"
kind = "ruler"
tasks = ["niah_multiquery"]
length = 512
instances = 2
essay = "builtin"

[methods.snapkv]

[[grids]]
name = "reuse"
benchmarks = ["ruler-512-multiquery"]
methods = ["snapkv"]
compression = [0.5]
protocols = ["query-agnostic", "reuse"]
backends = ["sdpa"]

[statistics]
bootstrap_resamples = 2000
"""


def run(cmd, **kwargs):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    for k in list(env):
        if k.startswith("SLURM_"):
            del env[k]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, **kwargs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kvaudit", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    if not os.path.exists(args.model):
        print("SKIP: %s is absent (tools/setup.sh fetches it)" % args.model)
        return 77
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    manifest = os.path.join(args.workdir, "study.toml")
    with open(manifest, "w") as f:
        f.write(MANIFEST.format(model=os.path.abspath(args.model)))
    study = os.path.join(args.workdir, "results")

    plan = run([args.kvaudit, "plan", manifest])
    check(plan.returncode == 0, "plan exits 0 (%d: %s)" % (plan.returncode, plan.stderr[-400:]))
    check("reuse: 2 reuse units" in plan.stdout, "plan prints the reuse units")
    check("reuse                                  4" in plan.stdout,
          "plan counts 4 reuse cells (2 contexts x (snapkv + full-KV))")

    launch = [args.mpiexec, "-np", "2", "--oversubscribe", "-x", "OPENBLAS_NUM_THREADS",
              args.kvaudit, "run", manifest]
    first = run(launch, timeout=1800)
    check(first.returncode == 0, "mpirun -np 2 kvaudit run exits 0 (%d: %s)"
          % (first.returncode, (first.stdout + first.stderr)[-800:]))

    records = []
    for path in sorted(glob.glob(os.path.join(study, "shards", "part-*.h5"))):
        with h5py.File(path, "r") as f:
            check(int(f.attrs["schema_version"]) == 6, path + ": schema version 6")
            rows = f["records"][...]
            protocols = {v: k for k, v in h5py.check_enum_dtype(rows.dtype["protocol"]).items()}
            check(h5py.check_enum_dtype(rows.dtype["protocol"]).get("reuse") == 2,
                  path + ": Protocol enum member reuse stored as 2")
            for row in rows:
                records.append((protocols[row["protocol"]], row))
    by_cell = collections.defaultdict(list)
    for protocol, row in records:
        by_cell[(protocol, int(row["cell_id"]))].append(row)
    reuse = {k: v for k, v in by_cell.items() if k[0] == "reuse"}
    plain = {k: v for k, v in by_cell.items() if k[0] == "query-agnostic"}
    check(len(reuse) == 4 and len(plain) == 4, "4 reuse cells and 4 query-agnostic cells recorded "
          "(%d, %d)" % (len(reuse), len(plain)))
    for (_, cell), rows in sorted(reuse.items()):
        questions = sorted(int(r["question"]) for r in rows)
        check(questions == [0, 1, 2, 3], "reuse cell %016x: questions %s" % (cell, questions))
        check(all(int(r["n_questions"]) == 4 for r in rows), "reuse cell %016x: n_questions 4"
              % cell)
        check(all(r["status"] == 0 for r in rows), "reuse cell %016x: every record ok" % cell)
        check(len({int(r["kept_digest"]) for r in rows}) == 1 and
              len({int(r["kept_bytes"]) for r in rows}) == 1,
              "reuse cell %016x: one kept set for its four questions" % cell)
        check(len({int(r["prompt_digest"]) for r in rows}) == 4,
              "reuse cell %016x: four distinct prompts" % cell)
        full = rows[0]["method_id"] == b"full"
        shared = [int(r["shared_costs"]) for r in rows]
        want = 0 if full else (1 << 5) | (1 << 6)
        check(all(s & ((1 << 5) | (1 << 6)) == want for s in shared),
              "reuse cell %016x: select/evict shared by its questions (%s)" % (cell, shared))
    for (_, cell), rows in sorted(plain.items()):
        check(len(rows) == 1 and int(rows[0]["question"]) == 0 and
              int(rows[0]["n_questions"]) == 1,
              "query-agnostic cell %016x: one record, question 0 of 1" % cell)

    again = run(launch, timeout=600)
    check(again.returncode == 0 and "0 cell(s) recorded now" in again.stderr and
          "8 of 8 cells recorded in all" in again.stderr,
          "a rerun finds every cell done (%d: %s)" % (again.returncode, again.stderr[-400:]))

    reduce = run([args.kvaudit, "reduce", study, "--no-figures"], timeout=600)
    check(reduce.returncode == 0, "reduce exits 0 (%d: %s)" % (reduce.returncode,
                                                               reduce.stderr[-400:]))
    check("20 of 20 preregistered (cell, question) results recorded" in reduce.stdout,
          "reduce counts 4 query-agnostic records + 4 reuse cells x 4 questions")
    report = os.path.join(study, "report", "report.md")
    text = open(report).read() if os.path.exists(report) else ""
    check("intervals resample contexts (cluster bootstrap" in text,
          "the report says reuse intervals resample contexts")
    check("| reuse | snapkv |" in text, "the report has reuse rows for snapkv")

    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
