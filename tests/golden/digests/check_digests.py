#!/usr/bin/env python3
"""The digest golden of the CPU engine's canonical evaluation order (docs/RECORDS.md
§Reproducibility): runs study.toml with `kvaudit run` at each instruction-set level this CPU has
(KVAUDIT_CPU_ISA; scalar only when named in --levels: its whole-model checks are in
tests/cpu_runtime/canonical_order_test.cpp, and a whole study at scalar takes minutes) and each
thread count asked for, reads every record back with h5py and compares its
prompt digest, kept-set digest, output and status with expected.json. Exit 0 when every run
matches every committed record, 1 naming each difference, 77 (ctest SKIP) with the reason when the
embedded default model is absent.

  check_digests.py --kvaudit BIN --source DIR --work DIR [--levels avx2,avx512] [--threads 1,2]
  check_digests.py ... --write     (re-record expected.json from the first run: only when the
                                    evaluation order changes on purpose, with a new order name)
"""
import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"


def cpu_levels():
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    levels = []
    if {"avx2", "fma"} <= flags:
        levels.append("avx2")
        if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
            levels.append("avx512")
            if "avx512_bf16" in flags:
                levels.append("avx512bf16")
    return levels


def manifest_for(source, out_dir):
    text = open(os.path.join(HERE, "study.toml")).read()
    text = re.sub(r'(?m)^output_dir = ".*"$', 'output_dir = "%s"' % out_dir, text)
    text = text.replace('"../../../' + MODEL + '"', '"%s"' % os.path.join(source, MODEL))
    return text


def read_records(out_dir):
    records = {}
    shards = sorted(glob.glob(os.path.join(out_dir, "**", "*.h5"), recursive=True))
    for shard in shards:
        with h5py.File(shard, "r") as f:
            if "records" not in f:
                continue
            rows = f["records"][...]
            status_names = {v: k for k, v in h5py.check_enum_dtype(rows.dtype["status"]).items()}
            for row in rows:
                key = "%016x:%d" % (int(row["cell_id"]), int(row["question"]))
                output = row["output"]
                output = output.decode("utf-8") if isinstance(output, bytes) else str(output)
                records[key] = {
                    "method": row["method"].decode("utf-8") if isinstance(row["method"], bytes)
                    else str(row["method"]),
                    "status": status_names.get(int(row["status"]), str(int(row["status"]))),
                    "prompt_digest": "%016x" % int(row["prompt_digest"]),
                    "kept_digest": "%016x" % int(row["kept_digest"]),
                    "output_sha256": hashlib.sha256(output.encode("utf-8")).hexdigest()[:16],
                }
    return records


def run_study(kvaudit, source, work, level, threads):
    run_dir = os.path.join(work, "%s-t%d" % (level, threads))
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    out_dir = os.path.join(run_dir, "results")
    manifest = os.path.join(run_dir, "study.toml")
    with open(manifest, "w") as f:
        f.write(manifest_for(source, out_dir))
    env = dict(os.environ, KVAUDIT_CPU_ISA=level, OMP_NUM_THREADS=str(threads))
    for step in (["plan", manifest], ["run", manifest]):
        done = subprocess.run([kvaudit] + step, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            sys.exit("kvaudit %s at %s, %d thread(s) exited %d:\n%s" %
                     (step[0], level, threads, done.returncode, done.stdout[-4000:]))
    return read_records(out_dir)


def compare(expected, got, name):
    problems = []
    for key in sorted(set(expected) | set(got)):
        if key not in got:
            problems.append("%s: cell %s (%s) missing" % (name, key, expected[key]["method"]))
            continue
        if key not in expected:
            problems.append("%s: cell %s (%s) not in the golden" % (name, key, got[key]["method"]))
            continue
        for field in ("status", "prompt_digest", "kept_digest", "output_sha256"):
            if expected[key][field] != got[key][field]:
                problems.append("%s: cell %s (%s) %s %s, golden %s" %
                                (name, key, got[key]["method"], field, got[key][field],
                                 expected[key][field]))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kvaudit", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--levels", default="",
                        help="comma-separated, or 'best'; default: every level here")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    args.source = os.path.abspath(args.source)
    args.kvaudit = os.path.abspath(args.kvaudit)
    args.work = os.path.abspath(args.work)
    if not os.path.exists(os.path.join(args.source, MODEL)):
        print("SKIP: the embedded default model %s is absent (tools/fetch_default_model.sh)" % MODEL)
        return 77
    here = cpu_levels()
    if args.levels == "best":
        args.levels = here[-1] if here else ""
    levels = [level for level in args.levels.split(",") if level] or here
    if not levels:
        print("SKIP: this CPU has neither AVX2 nor FMA: only the scalar level, too slow for a study")
        return 77
    for level in levels:
        if level not in here and level != "scalar":
            print("SKIP: this CPU lacks level %s (it has %s)" % (level, ", ".join(here) or "none"))
            return 77
    threads = [int(t) for t in args.threads.split(",")]
    golden_path = os.path.join(HERE, "expected.json")
    expected = None if args.write else json.load(open(golden_path))["records"]
    problems = []
    for level in levels:
        for t in threads:
            got = run_study(args.kvaudit, args.source, args.work, level, t)
            name = "%s, %d thread(s)" % (level, t)
            if expected is None:
                with open(golden_path, "w") as f:
                    json.dump({"study": "tests/golden/digests/study.toml",
                               "order": "kvaudit-canonical-1",
                               "records": got}, f, indent=1, sort_keys=True)
                    f.write("\n")
                print("wrote %s: %d records (%s)" % (golden_path, len(got), name))
                expected = got
                continue
            found = compare(expected, got, name)
            print("%s: %d records, %d differences from the golden" % (name, len(got), len(found)))
            problems += found
    for p in problems[:50]:
        print(p)
    if problems:
        print("%d differences in all" % len(problems))
        return 1
    print("every run reproduced all %d golden records" % len(expected))
    return 0


if __name__ == "__main__":
    sys.exit(main())
