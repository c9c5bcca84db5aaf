#!/usr/bin/env python3
"""llama.cpp's CPU numbers beside bench/bench_cpu_runtime (docs/PERFORMANCE.md).

Same model, same shapes as kvaudit's CPU backend bench: prefill tokens/s for one
forward of 512/1024/2048 random token ids, and decode tokens/s at batch 1/8/32,
where each of the B sequences holds a 512-token context and 16 steps of one
token per sequence run as one llama_decode of B tokens (timed over the 16 steps
only; logits for all B tokens, as a sampler needs). Prefill is one llama_decode
of the whole prompt (n_batch = n_ubatch = 2048, logits for the last token only).
Each cell is the median of --reps timed repeats after one untimed warm-up per
llama_context. Each thread count runs in a fresh child process (n_threads =
n_threads_batch = N, OMP_NUM_THREADS=N) and saves --tmp/threads<N>.json; a CPU
share (process CPU time / wall / N) beside every cell shows how much of the
cores the shared VM gave the run. KV cache: llama.cpp's default f16, one stream
per sequence (kv_unified = false).
Rows: the GGUF as shipped (Q4_1, llama.cpp's native path) and, where
llama_model_quantize can requantize it, the same weights as F32 and BF16 GGUF
(written under /tmp, never in the repo) -- kvaudit dequantizes to f32/bf16, so
those are the like-for-like rows. Each cell reads "flash-attn off / on".

Setup (stdlib + llama_cpp only; the venv is git-ignored). llama-cpp-python
0.3.36 built from source without AMX (AMX tile state is not enabled on these
VMs: AMX instructions die with SIGILL) and without -march=native:

    python3 -m venv tools/.venv-llamacpp
    CMAKE_BUILD_PARALLEL_LEVEL=2 \\
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \\
      -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON \\
      -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \\
      -DGGML_AMX_BF16=OFF -DGGML_BLAS=OFF -DGGML_OPENMP=ON" \\
    tools/.venv-llamacpp/bin/pip install --no-binary llama-cpp-python \\
      llama-cpp-python==0.3.36
    # no AMX in the CPU backend (must print 0):
    objdump -d tools/.venv-llamacpp/lib/python3*/site-packages/llama_cpp/lib/libggml-cpu*.so \\
      | grep -c 'tdpb\\|ldtilecfg'

Run (about 20 minutes per thread count on a 2-vCPU VM, longer when shared):

    tools/.venv-llamacpp/bin/python tools/bench_llamacpp.py --threads 1,2
    # tables again from saved runs (e.g. thread counts run at different times):
    tools/.venv-llamacpp/bin/python tools/bench_llamacpp.py \
        --table /tmp/kvaudit-llamacpp/threads1.json /tmp/kvaudit-llamacpp/threads2.json
"""

import argparse
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import time

import llama_cpp as L

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(
    REPO, "models", "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
PREFILL_LENS = (512, 1024, 2048)
DECODE_BATCHES = (1, 8, 32)
DECODE_CTX = 512
DECODE_STEPS = 16
# Per-sequence KV size for the decode contexts; llama.cpp pads it to 256 anyway.
DECODE_CTX_PER_SEQ = 768

_LOG_LINES = []
_QUIET = True


@L.llama_log_callback
def _log_cb(level, text, _user):
    s = text.decode("utf-8", "replace") if text else ""
    _LOG_LINES.append(s)
    if not _QUIET:
        sys.stderr.write(s)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def progress(msg):
    print(f"#   {msg}  [load {loadavg()}]", file=sys.stderr, flush=True)


def convert(src, ftype_name, out_dir, nthread):
    """Requantize src (Q4_1) to F32 or BF16 with llama_model_quantize."""
    ftype = {"F32": L.LLAMA_FTYPE_ALL_F32, "BF16": L.LLAMA_FTYPE_MOSTLY_BF16}[ftype_name]
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.splitext(os.path.basename(src))[0]
    out = os.path.join(out_dir, f"{base}.requant-{ftype_name}.gguf")
    if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src):
        return out
    p = L.llama_model_quantize_default_params()
    p.nthread = nthread
    p.ftype = ftype
    p.allow_requantize = True
    tmp = out + ".tmp"
    rc = L.llama_model_quantize(src.encode(), tmp.encode(), ctypes.byref(p))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({ftype_name}) returned {rc}")
    os.replace(tmp, out)
    return out


def make_batch(tokens, pos, seq, logits):
    n = len(tokens)
    b = L.llama_batch_init(n, 0, 1)
    b.n_tokens = n
    for i in range(n):
        b.token[i] = tokens[i]
        b.pos[i] = pos[i]
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = seq[i]
        b.logits[i] = 1 if logits[i] else 0
    return b


def new_ctx(model, n_ctx, n_batch, n_seq_max, threads, flash):
    cp = L.llama_context_default_params()
    cp.n_ctx = n_ctx
    cp.n_batch = n_batch
    cp.n_ubatch = n_batch
    cp.n_seq_max = n_seq_max
    cp.n_threads = threads
    cp.n_threads_batch = threads
    cp.flash_attn_type = (L.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash
                          else L.LLAMA_FLASH_ATTN_TYPE_DISABLED)
    cp.kv_unified = False  # one KV stream per sequence
    cp.no_perf = True
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        raise RuntimeError("llama_init_from_model failed")
    return ctx


def decode(ctx, batch):
    rc = L.llama_decode(ctx, batch)
    if rc != 0:
        raise RuntimeError(f"llama_decode returned {rc}")
    L.llama_synchronize(ctx)


def bench_prefill(model, n_vocab, threads, flash, reps, rng):
    ctx = new_ctx(model, max(PREFILL_LENS), max(PREFILL_LENS), 1, threads, flash)
    mem = L.llama_get_memory(ctx)
    res, cpu = {}, {}
    for n in PREFILL_LENS:
        times, shares = [], []
        warm = 1 if n == PREFILL_LENS[0] else 0  # one untimed warm-up per context
        for r in range(reps + warm):
            toks = [rng.randrange(n_vocab) for _ in range(n)]
            b = make_batch(toks, list(range(n)), [0] * n, [i == n - 1 for i in range(n)])
            L.llama_memory_clear(mem, True)
            c0, t0 = time.process_time(), time.perf_counter()
            decode(ctx, b)
            c1, t1 = time.process_time(), time.perf_counter()
            L.llama_batch_free(b)
            if r >= warm:
                times.append(t1 - t0)
                shares.append((c1 - c0) / ((t1 - t0) * threads))
        res[n] = n / statistics.median(times)
        cpu[n] = statistics.median(shares)
        progress(f"prefill {n}: {res[n]:.1f} tok/s (reps {[round(n / t, 1) for t in times]}, "
                 f"cpu share {cpu[n]:.2f})")
    L.llama_free(ctx)
    return res, cpu


def bench_decode(model, n_vocab, threads, flash, reps, rng):
    res, cpu = {}, {}
    for B in DECODE_BATCHES:
        ctx = new_ctx(model, B * DECODE_CTX_PER_SEQ, DECODE_CTX, B, threads, flash)
        mem = L.llama_get_memory(ctx)
        # Untimed: sequence 0 gets a 512-token context, sequences 1..B-1 a copy of its KV
        # (llama_memory_seq_cp across the per-sequence streams): the timed steps do the
        # same work whatever the KV holds, and the set-up prefills once instead of B times.
        toks = [rng.randrange(n_vocab) for _ in range(DECODE_CTX)]
        b = make_batch(toks, list(range(DECODE_CTX)), [0] * DECODE_CTX,
                       [i == DECODE_CTX - 1 for i in range(DECODE_CTX)])
        decode(ctx, b)
        L.llama_batch_free(b)
        for s in range(1, B):
            L.llama_memory_seq_cp(mem, 0, s, -1, -1)
        steps = [make_batch([rng.randrange(n_vocab) for _ in range(B)],
                            [DECODE_CTX + k] * B, list(range(B)), [True] * B)
                 for k in range(DECODE_STEPS)]
        times, shares = [], []
        for r in range(reps + 1):  # r == 0: warm-up
            L.llama_memory_seq_rm(mem, -1, DECODE_CTX, -1)  # drop the last repeat's steps
            c0, t0 = time.process_time(), time.perf_counter()
            for b in steps:
                decode(ctx, b)
            c1, t1 = time.process_time(), time.perf_counter()
            if r:
                times.append(t1 - t0)
                shares.append((c1 - c0) / ((t1 - t0) * threads))
        for b in steps:
            L.llama_batch_free(b)
        res[B] = B * DECODE_STEPS / statistics.median(times)
        cpu[B] = statistics.median(shares)
        progress(f"decode b{B}: {res[B]:.1f} tok/s "
                 f"(reps {[round(B * DECODE_STEPS / t, 1) for t in times]}, "
                 f"cpu share {cpu[B]:.2f})")
        L.llama_free(ctx)
    return res, cpu


def child(args):
    """One thread count, all weight files, flash-attn off and on; JSON to stdout."""
    global _QUIET
    _QUIET = not args.verbose
    L.llama_log_set(_log_cb, None)
    L.llama_backend_init()
    out = {"threads": args.threads, "load_before": loadavg(), "rows": []}
    for label, path in zip(args.labels.split(","), args.paths.split(",")):
        mp = L.llama_model_default_params()
        _LOG_LINES.clear()
        model = L.llama_model_load_from_file(path.encode(), mp)
        if not model:
            raise RuntimeError(f"cannot load {path}")
        types = sorted({ln.split(":", 1)[1].strip() for ln in _LOG_LINES
                        if "- type " in ln and "tensors" in ln})
        vocab = L.llama_model_get_vocab(model)
        n_vocab = L.llama_vocab_n_tokens(vocab)
        row = {"weights": label, "tensor_types": types,
               "model_bytes": L.llama_model_size(model)}
        for flash in args.flash:
            rng = random.Random(1234)
            key = "fa_on" if flash else "fa_off"
            progress(f"{label} threads={args.threads} {key}")
            pre, pre_cpu = bench_prefill(model, n_vocab, args.threads, flash, args.reps, rng)
            dec, dec_cpu = bench_decode(model, n_vocab, args.threads, flash, args.reps, rng)
            row[key] = {"prefill": pre, "decode": dec,
                        "cpu_share": {"prefill": pre_cpu, "decode": dec_cpu}}
        out["rows"].append(row)
        L.llama_model_free(model)
    out["load_after"] = loadavg()
    out["system_info"] = L.llama_print_system_info().decode()
    out["version"] = L.__version__
    out["cpu"] = cpu_model()
    out["reps"] = args.reps
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


def fmt(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def print_tables(results):
    """Markdown tables (tokens/s, then CPU share) from the per-thread-count results."""
    r0 = results[0]
    keys = [k for k in ("fa_off", "fa_on") if k in r0["rows"][0]]
    fa = " / ".join({"fa_off": "flash-attn off", "fa_on": "flash-attn on"}[k] for k in keys)
    print(f"llama-cpp-python {r0['version']}; CPU: {r0['cpu']}; reps {r0['reps']} (median)")
    print(f"system_info: {r0['system_info'].strip()}")
    for r in results:
        print(f"threads {r['threads']}: loadavg before {r['load_before']}, after {r['load_after']}")
    for row in r0["rows"]:
        print(f"{row['weights']}: {row['model_bytes'] / 2**20:.0f} MiB, tensors "
              + "; ".join(row["tensor_types"]))
    head = ["weights", "threads"] + [f"prefill {n}" for n in PREFILL_LENS] \
        + [f"decode b{b}" for b in DECODE_BATCHES]
    labels = [row["weights"] for row in r0["rows"]]

    def table(cell):
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for label in labels:
            for r in results:
                row = next(x for x in r["rows"] if x["weights"] == label)
                cells = [label, str(r["threads"])]
                for part, sizes in (("prefill", PREFILL_LENS), ("decode", DECODE_BATCHES)):
                    for n in sizes:
                        cells.append(" / ".join(cell(row[k], part, str(n)) for k in keys))
                print("| " + " | ".join(cells) + " |")

    print()
    print(f"Tokens/s, {fa}:")
    print()
    table(lambda m, part, n: fmt(m[part][n]))
    print()
    print("CPU share = process CPU time / (wall time x threads), median over the repeats; "
          "under 1 means the VM's other work took cores (a spinning thread pool counts as "
          "busy):")
    print()
    table(lambda m, part, n: f"{m['cpu_share'][part][n]:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--threads", default="1,2", help="comma list; one child process each")
    ap.add_argument("--weights", default="Q4_1,F32,BF16",
                    help="Q4_1 = the GGUF as given; F32/BF16 = requantized under --tmp")
    ap.add_argument("--flash-attn", default="off,on", help="off, on or off,on")
    ap.add_argument("--reps", type=int, default=3, help="timed repeats (median), >= 3")
    ap.add_argument("--tmp", default="/tmp/kvaudit-llamacpp",
                    help="converted GGUFs and the per-thread-count results threads<N>.json")
    ap.add_argument("--table", nargs="+", metavar="JSON",
                    help="only print the tables from saved threads<N>.json files")
    ap.add_argument("--verbose", action="store_true", help="show llama.cpp's log")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--labels", help=argparse.SUPPRESS)
    ap.add_argument("--paths", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.flash = [x.strip() == "on" for x in args.flash_attn.split(",")]
    if args.table:
        results = []
        for path in args.table:
            with open(path) as f:
                results.append(json.load(f))
        print_tables(results)
        return
    if args.child:
        args.threads = int(args.threads)
        child(args)
        return
    if args.reps < 3:
        ap.error("--reps must be >= 3")

    global _QUIET
    _QUIET = not args.verbose
    L.llama_log_set(_log_cb, None)
    L.llama_backend_init()
    labels, paths = [], []
    for w in args.weights.split(","):
        w = w.strip().upper()
        if w in ("Q4_1", "NATIVE"):
            labels.append("Q4_1")
            paths.append(args.model)
        else:
            labels.append(w)
            paths.append(convert(args.model, w, args.tmp, 2))

    results = []
    for t in [int(x) for x in args.threads.split(",")]:
        out = os.path.join(args.tmp, f"threads{t}.json")
        env = dict(os.environ, OMP_NUM_THREADS=str(t))
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--threads", str(t),
               "--labels", ",".join(labels), "--paths", ",".join(paths),
               "--flash-attn", args.flash_attn, "--reps", str(args.reps), "--out", out]
        if args.verbose:
            cmd.append("--verbose")
        subprocess.run(cmd, env=env, check=True)
        with open(out) as f:
            results.append(json.load(f))
    print_tables(results)


if __name__ == "__main__":
    main()
