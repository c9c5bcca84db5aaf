#!/usr/bin/env python3
"""R-KV golden: the kept sets of the official R-KV code on seeded random keys and window queries.

Writes tests/golden/rkv/official_kept.json, read by tests/methods/rkv_test.cpp (RkvOfficial):
  {"generator", "source": {"repository", "commit", "files"}, "versions", "cases": [
     {"num_heads", "num_kv_heads", "head_dim", "length", "window", "kernel_size", "mix_lambda", "budget",
      "keys": [Hkv][L*d] (f32 values), "queries": [H][window*d] (post-RoPE window queries),
      "kept": [[positions, ascending] per KV head]}]}
The official code is R1KV.update_kv (rkv/compression/r1_kv.py) with compute_attention_scores and cal_similarity
(rkv/utils.py) of github.com/Zefan-Cai/R-KV at the commit below, loaded from a checkout given with --rkv (its
package __init__ imports model code for a transformers version we do not have, so the two files are loaded
alone). Its returned keys are matched (exact bytes) to the input rows to give the kept positions. f32 on the
CPU, one thread.

Rerun: git clone https://github.com/Zefan-Cai/R-KV /tmp/R-KV && git -C /tmp/R-KV checkout d15c9767
       tools/.venv-kvpress/bin/python tools/golden/make_rkv_golden.py --rkv /tmp/R-KV
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import types
from pathlib import Path

import torch

COMMIT = "d15c9767e67c2bd9807128fecc35223fa2484a69"
SEED = 20261202
REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "golden" / "rkv" / "official_kept.json"
# (query heads, KV heads, head_dim, L, window, kernel, lambda, budget)
CASES = ((4, 2, 16, 40, 8, 7, 0.07, 24), (2, 2, 8, 33, 4, 5, 0.1, 12), (4, 1, 16, 48, 8, 7, 0.07, 30))


def load_official(root: Path):
    package = types.ModuleType("rkv_official")
    package.__path__ = []
    sys.modules["rkv_official"] = package
    spec = importlib.util.spec_from_file_location("rkv_official.utils", root / "rkv" / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    package.cal_similarity = utils.cal_similarity
    package.compute_attention_scores = utils.compute_attention_scores
    spec = importlib.util.spec_from_file_location("rkv_official.r1_kv", root / "rkv" / "compression" / "r1_kv.py")
    r1_kv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(r1_kv)
    return r1_kv.R1KV


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rkv", type=Path, required=True, help="checkout of github.com/Zefan-Cai/R-KV")
    args = parser.parse_args()
    R1KV = load_official(args.rkv)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(SEED)
    cases = []
    for h, hkv, d, length, window, kernel, lam, budget in CASES:
        keys = torch.randn(1, hkv, length, d, generator=generator)
        # Near-duplicate keys, as a reasoning trace repeats itself: every 5th key echoes its predecessor.
        keys[:, :, 5::5] = keys[:, :, 4:-1:5] + 0.1 * torch.randn(keys[:, :, 5::5].shape, generator=generator)
        queries = torch.randn(1, h, window, d, generator=generator)
        values = torch.zeros_like(keys)
        press = R1KV(budget=budget, window_size=window, kernel_size=kernel, mix_lambda=lam)
        out_keys, _ = press.update_kv(keys, queries, values)
        kept = []
        for head in range(hkv):
            rows = {keys[0, head, j].numpy().tobytes(): j for j in range(length)}
            assert len(rows) == length
            kept.append(sorted(rows[r.numpy().tobytes()] for r in out_keys[0, head]))
            assert len(kept[-1]) == budget
        cases.append({"num_heads": h, "num_kv_heads": hkv, "head_dim": d, "length": length, "window": window,
                      "kernel_size": kernel, "mix_lambda": lam, "budget": budget,
                      "keys": [keys[0, g].flatten().tolist() for g in range(hkv)],
                      "queries": [queries[0, q].flatten().tolist() for q in range(h)], "kept": kept})
    doc = {"generator": "tools/golden/make_rkv_golden.py",
           "source": {"repository": "github.com/Zefan-Cai/R-KV", "commit": COMMIT,
                      "files": ["rkv/compression/r1_kv.py", "rkv/utils.py"]},
           "versions": {"torch": torch.__version__, "python": platform.python_version()},
           "seed": SEED, "cases": cases}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {OUT}: {len(cases)} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
