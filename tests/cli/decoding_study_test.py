#!/usr/bin/python3
"""A study with decode-time compression end to end (issue 19; docs/MANIFEST.md §grids.decoding).

SmolLM2-135M-Instruct, RULER niah_single_1 at 512 tokens, 2 instances, snapkv 0.5 + full KV,
query-agnostic, sdpa — in two grids over the same units: "plain" without a decoding table and
"decoding" with `[grids.decoding]` (knorm every 4 decode steps down to 100 entries per layer and
KV head). Checks: plan prints the decoding table and counts both grids' cells (the table is part
of the cells' content, so the grids do not merge); `kvaudit run` completes; read back with h5py,
every record of the decoding grid compressed while decoding (decode_compressions >= 1,
final_kv_bytes < peak_kv_bytes, at most 100 entries per (layer, KV head) at the end) and every
record of the plain grid did not (0 compressions, final == peak); reduce completes. A third grid
"ratio" has `target_compression_ratio = 0.5` instead of target_size (kvpress
CompressionRatioDecodingPress): its records end with exactly int(0.5·T) + (steps since the last
compression) entries per (layer, KV head), T = the tokens seen at the last compression. A fourth
grid "dms" has no decoding table but dms(knorm, sliding_window_size 16) at threshold 0 with and
without `decoding = true` (kvpress DMSPress(decoding=True) / its prefill form): KNorm's scores −‖k‖
are all below 0, so every entry outside the window goes; the decoding form ends with exactly the
16 newest entries per (layer, KV head) and evicts at every decode step, the prefill form keeps 16
after the prefill and then grows by every fed and generated token.

Usage: decoding_study_test.py --kvaudit BIN --model GGUF --workdir DIR
Exit 0 = pass, 77 = skipped (the reason is printed), 1 = failure.
"""
import argparse
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


GRID = """
[[grids]]
name = "{name}"
benchmarks = ["ruler-512"]
methods = ["snapkv"]
compression = [0.5]
protocols = ["query-agnostic"]
attention_backends = ["sdpa"]
"""

MANIFEST = """[study]
name = "decoding-study-test"
seed = 3
output_dir = "results"

[[models]]
name = "smollm2-135m-instruct"
path = "{model}"
format = "gguf"
chat_template = "chatml"
dtype = "f32"

[[benchmarks]]
name = "ruler-512"
kind = "ruler"
tasks = ["niah_single_1"]
length = 512
instances = 2
essay = "builtin"

[methods.snapkv]
[methods.knorm]
[methods.dms_decoding]
method = "dms"
scorer = "knorm"
sliding_window_size = 16
decoding = true
[methods.dms_prefill]
method = "dms"
scorer = "knorm"
sliding_window_size = 16
""" + GRID.format(name="plain") + GRID.format(name="decoding") + """
[grids.decoding]
method = "knorm"
compression_interval = 4
target_size = 100
""" + GRID.format(name="ratio") + """
[grids.decoding]
method = "knorm"
compression_interval = 4
target_compression_ratio = 0.5

[[grids]]
name = "dms"
benchmarks = ["ruler-512"]
methods = ["dms_decoding", "dms_prefill"]
thresholds = [0.0]
protocols = ["query-agnostic"]
attention_backends = ["sdpa"]
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kvaudit", required=True)
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
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")

    plan = subprocess.run([args.kvaudit, "plan", manifest], capture_output=True, text=True,
                          env=env)
    check(plan.returncode == 0, "plan exits 0 (%s)" % plan.stderr[-300:])
    check("decoding: every cell also compresses while decoding: knorm every 4 steps down to 100"
          in plan.stdout, "plan prints the decoding table")
    check("decoding: every cell also compresses while decoding: knorm every 4 steps down to "
          "max(1, int(T x (1 - 0.5))) (T = tokens seen)" in plan.stdout,
          "plan prints the ratio grid's decoding table")
    check("total      2 units, 16 cells (2 cells shared by grids counted once)" in plan.stdout,
          "the decoding grids' cells are distinct from the plain grid's and each other's; the dms "
          "grid's full-KV cells are the plain grid's")

    run = subprocess.run([args.kvaudit, "run", manifest], capture_output=True, text=True, env=env,
                         timeout=1200)
    check(run.returncode == 0, "run exits 0 (%s)" % run.stderr[-500:])

    records = []
    for path in sorted(glob.glob(os.path.join(args.workdir, "results", "shards", "part-*.h5"))):
        with h5py.File(path, "r") as f:
            records.extend(f["records"][...])
    check(len(records) == 16, "16 records (%d)" % len(records))
    dms = [r for r in records if r["method_id"] == b"dms"]
    records = [r for r in records if r["method_id"] != b"dms"]
    # SmolLM2: 30 layers x 3 KV heads; an entry of one (layer, KV head) is K and V of 64 f32
    # values each = 512 bytes. After the last compression a cache holds at most 100 entries per
    # (layer, KV head) plus the tokens of up to 3 later steps (interval 4).
    most = 30 * 3 * (100 + 3) * 512
    entry = 30 * 3 * 512
    # The ratio grid: n generated tokens = n - 1 decode steps, compressions every 4 (each evicts:
    # the cache, prompt - prefill eviction + steps, stays above half of every token seen), the last
    # at step s with T = prompt + s tokens seen; then n - 1 - s more entries.
    def ratio_final(r):
        steps = int(r["n_generated_tokens"]) - 1
        s = steps // 4 * 4
        return (int(0.5 * (int(r["n_prompt_tokens"]) + s)) + steps - s) * entry
    ratio = [r for r in records if r["decode_compressions"] > 0 and r["final_kv_bytes"] > most]
    compressing = [r for r in records if r["decode_compressions"] > 0 and r["final_kv_bytes"] <= most]
    plain = [r for r in records if r["decode_compressions"] == 0]
    check(len(compressing) == 4 and len(plain) == 4 and len(ratio) == 4,
          "4 records compressed to the fixed target, 4 to the ratio, 4 did not (%d, %d, %d)"
          % (len(compressing), len(ratio), len(plain)))
    for r in ratio:
        check(r["status"] == 0 and r["final_kv_bytes"] == ratio_final(r) and
              r["decode_compressions"] == (int(r["n_generated_tokens"]) - 1) // 4,
              "%s ratio 0.5: final %d == %d, %d compressions" % (
                  r["method_id"].decode(), r["final_kv_bytes"], ratio_final(r),
                  r["decode_compressions"]))
    for r in compressing:
        check(r["status"] == 0 and r["final_kv_bytes"] < r["peak_kv_bytes"] and
              r["final_kv_bytes"] <= most,
              "%s: final %d < peak %d" % (r["method_id"].decode(), r["final_kv_bytes"],
                                           r["peak_kv_bytes"]))
    for r in plain:
        check(r["status"] == 0 and r["final_kv_bytes"] == r["peak_kv_bytes"],
              "%s without decoding: final == peak" % r["method_id"].decode())
    # dms at T = 0 over KNorm (every score -||k|| < 0): w = 16 entries per (layer, KV head) after the
    # prefill; the decoding form holds exactly 16 after every step (17 at the peak: the step's token
    # before the oldest goes) and evicts at each of the n - 1 decode steps; the prefill form grows
    # by the rest of the prompt and every decode step.
    check(sorted(r["method"] for r in dms) == [b"dms_decoding"] * 2 + [b"dms_prefill"] * 2,
          "two records of each dms form (%s)" % sorted(r["method"] for r in dms))
    for r in dms:
        steps = int(r["n_generated_tokens"]) - 1
        rest = int(r["n_prompt_tokens"]) - int(r["n_context_tokens"])
        ok = r["status"] == 0 and r["kept_bytes"] == 16 * entry
        if r["method"] == b"dms_decoding":
            ok = ok and r["final_kv_bytes"] == 16 * entry and r["peak_kv_bytes"] == 17 * entry \
                and r["decode_compressions"] == steps
        else:
            ok = ok and r["final_kv_bytes"] == (16 + rest + steps) * entry \
                and r["decode_compressions"] == 0
        check(ok, "%s: kept %d, peak %d, final %d, %d compressions over %d decode steps" % (
            r["method"].decode(), r["kept_bytes"], r["peak_kv_bytes"], r["final_kv_bytes"],
            r["decode_compressions"], steps))

    reduce = subprocess.run([args.kvaudit, "reduce", os.path.join(args.workdir, "results"),
                             "--no-figures"], capture_output=True, text=True, env=env)
    check(reduce.returncode == 0, "reduce exits 0 (%s)" % reduce.stderr[-300:])
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
