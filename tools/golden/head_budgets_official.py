#!/usr/bin/env python3
"""Reference selections of HeadKV and LaCache from their OFFICIAL code, for kvaudit's C++ restatements
(methods/headkv.*, methods/lacache.*; tests/methods/head_budgets_test.cpp reads the results).

Neither method is in kvpress 0.5.5, so there is no kvpress golden; instead this script runs the authors'
own code on small CPU inputs. It fetches nothing: the official code must already be checked out at
these commits (only the listed files are used):

  HeadKV   https://github.com/FYYFU/HeadKV        0862a0955fe82e9ff611d59541918e02c5def625
           headkv/snapkv_utils.py (ReasonSnapKVCluster: __init__'s budget split and update_kv)
  LaCache  https://github.com/GATECH-EIC/LaCache  0f27c33bc1974c1f8a93656bca2dbb9641ef0937
           LongBench/lacache/kv_cache.py (LaCache.__call__), start_size as in LongBench/pred.py

  git clone https://github.com/FYYFU/HeadKV /tmp/HeadKV && git -C /tmp/HeadKV checkout 0862a09
  git clone https://github.com/GATECH-EIC/LaCache /tmp/LaCache && git -C /tmp/LaCache checkout 0f27c33

Run (kvaudit's kvpress venv has torch, numpy and transformers, which snapkv_utils.py imports):
  nice tools/.venv-kvpress/bin/python tools/golden/head_budgets_official.py [--headkv /tmp/HeadKV]
      [--lacache /tmp/LaCache]

Writes, under tests/golden/head_budgets/:
  tiny_head_scores.json   a SYNTHETIC head-score file for the tiny golden models (2 layers x 4 query
                          heads) in the official format {"layer-head": [scores]}. The official scores
                          come from needle-retrieval tests (Important_Head/retrieval_head_detection*.py)
                          that a randomly initialised tiny model cannot pass, so the values are a fixed
                          formula (see synthetic_head_scores), not measured importance. It serves the
                          factory/plan tests and the official comparison below.
  headkv_official.json    inputs (random f32 keys and window queries, MHA: the official code keeps one
                          set per query head) and, per configuration (cr, beta, temperature, pooling,
                          kernel), the kept positions of every (layer, head) as ReasonSnapKVCluster
                          .update_kv returns them (read back through values that encode positions).
  lacache_official.json   per configuration (L, layers, cr, span, overlap), the positions each layer
                          keeps after one LaCache call on a fresh object (the prefill compaction), or
                          the exception the official code raises; positions as [first, last] runs.

The HeadKV cluster reads its scores from a path it builds from the model name; the script hands it the
synthetic file by replacing the module's `open` (no code of the checkout is changed).
"""
import argparse
import builtins
import json
import math
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/golden/head_budgets"
HEADKV_COMMIT = "0862a0955fe82e9ff611d59541918e02c5def625"
LACACHE_COMMIT = "0f27c33bc1974c1f8a93656bca2dbb9641ef0937"


def kept_count(length, cr):
    return max(1, math.floor(length * (1.0 - cr)))


def synthetic_head_scores(layers, heads):
    """{"l-h": [three scores]}: a fixed, uneven spread (one head near zero, one dominant per layer)."""
    out = {}
    for l in range(layers):
        for h in range(heads):
            base = ((l * heads + h) * 7 % 11) / 10.0  # 0.0, 0.7, 0.3, 1.0, 0.6, 0.2, 0.9, 0.5
            out[f"{l}-{h}"] = [round(base * f, 6) for f in (0.5, 1.0, 1.5)]
    return out


def runs(positions):
    """Sorted positions as [first, last] runs."""
    out = []
    for p in positions:
        if out and out[-1][1] + 1 == p:
            out[-1][1] = p
        else:
            out.append([p, p])
    return out


def headkv_cases(checkout, scores_path):
    sys.path.insert(0, str(pathlib.Path(checkout) / "headkv"))
    import snapkv_utils  # noqa: E402  (the official module)

    snapkv_utils.open = lambda path, mode="r", *a, **k: builtins.open(scores_path, mode, *a, **k)
    layers, heads, length, dim, window = 2, 4, 48, 8, 8
    gen = torch.Generator().manual_seed(18)
    keys = [torch.randn(1, heads, length, dim, generator=gen) for _ in range(layers)]
    queries = [torch.randn(1, heads, length, dim, generator=gen) * 1.5 for _ in range(layers)]
    values = torch.arange(length, dtype=torch.float32).view(1, 1, length, 1).expand(1, heads, length, dim)
    cases = []
    for pooling, kernel in (("maxpool", 7), ("avgpool", 5)):
        for cr in (0.25, 0.5, 0.75):
            for beta in (1.005, 1.5, 4.0):
                for temp in (1.0, 2.0):
                    n = kept_count(length, cr)
                    kept = []
                    for layer in range(layers):
                        cluster = snapkv_utils.ReasonSnapKVCluster(
                            window_size=window, kernel_size=kernel, pooling=pooling, base_capacity=n,
                            head_choice="reason", beta=beta, temp=temp, layer_idx=layer,
                            num_hidden_layers=layers, num_attention_heads=heads, model="llama")
                        _, flat_values = cluster.update_kv(keys[layer], queries[layer], values.clone())
                        lens = cluster.head_lens.tolist()
                        per_head, start = [], 0
                        for h in range(heads):
                            got = flat_values[start:start + lens[h], 0].long().tolist()
                            start += lens[h]
                            per_head.append(sorted(got))
                        kept.append(per_head)
                    cases.append({"pooling": "max" if pooling == "maxpool" else "avg", "kernel_size": kernel,
                                  "compression": cr, "beta": beta, "temperature": temp, "kept": kept})
    return {
        "source": f"github.com/FYYFU/HeadKV@{HEADKV_COMMIT} headkv/snapkv_utils.py ReasonSnapKVCluster",
        "layers": layers, "heads": heads, "length": length, "head_dim": dim, "window": window,
        "head_scores": "tiny_head_scores.json",
        "keys": [k[0].tolist() for k in keys],                        # [layer][head][L][d]
        "window_queries": [q[0, :, -window:].tolist() for q in queries],  # [layer][head][w][d]
        "cases": cases,
    }


def lacache_cases(checkout):
    sys.path.insert(0, str(pathlib.Path(checkout) / "LongBench"))
    from lacache.kv_cache import LaCache  # noqa: E402  (the official class)

    configs = []
    for layers, shapes in ((2, [(1, 0)]), (4, [(2, 0), (3, 1), (1, 0)]), (8, [(3, 1), (4, 0), (5, 2)]),
                           (32, [(16, 0), (8, 4), (9, 3)])):
        for span, overlap in shapes:
            for length in (40, 64, 200, 1000):
                for cr in (0.25, 0.5, 0.75, 0.9):
                    if layers == 32 and length == 1000 and cr != 0.75:
                        continue  # keep the file small
                    configs.append((length, layers, cr, span, overlap))
    cases = []
    for length, layers, cr, span, overlap in configs:
        n = kept_count(length, cr)
        start = min(128, max(1, length - (layers + 1)), n - (layers + 1))  # LongBench/pred.py
        cache = [(torch.arange(length, dtype=torch.float64).view(1, 1, length, 1), torch.zeros(1, 1, length, 1))
                 for _ in range(layers)]
        case = {"length": length, "layers": layers, "compression": cr, "span": span, "overlap": overlap}
        try:
            out = LaCache(cache_size=n, start_size=start, span=span, overlap=overlap)(cache)
            case["kept"] = [runs(sorted(set(k.view(-1).long().tolist()))) for k, _ in out]
            case["official_entries"] = [int(k.shape[2]) for k, _ in out]
        except Exception as e:  # the official arithmetic is undefined here
            case["error"] = f"{type(e).__name__}: {e}"
        cases.append(case)
    return {"source": f"github.com/GATECH-EIC/LaCache@{LACACHE_COMMIT} LongBench/lacache/kv_cache.py LaCache",
            "max_start_size": 128, "cases": cases}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--headkv", default="/tmp/HeadKV")
    ap.add_argument("--lacache", default="/tmp/LaCache")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    scores = OUT / "tiny_head_scores.json"
    scores.write_text(json.dumps(synthetic_head_scores(2, 4)) + "\n")
    (OUT / "headkv_official.json").write_text(json.dumps(headkv_cases(args.headkv, scores)) + "\n")
    (OUT / "lacache_official.json").write_text(json.dumps(lacache_cases(args.lacache)) + "\n")
    for name in ("tiny_head_scores.json", "headkv_official.json", "lacache_official.json"):
        print(f"wrote {OUT / name} ({(OUT / name).stat().st_size} bytes)")


if __name__ == "__main__":
    main()
