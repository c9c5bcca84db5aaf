#!/usr/bin/env python3
"""kvpress CAMPress golden (decode-time cache merging) on the tiny models.

A script of its own like decoding.py (whose prompt/model helpers it reuses); writes tests/golden/kvpress/kept_decoding_cam.json
(the kept_decoding* prefix keeps it out of kvpress_parity_test.cpp's one-shot goldens), read by
tests/methods/kvpress_cam_parity_test.cpp:
  {"generator", "seed", "versions", "torch_threads", "sdpa_kernel", "draw_rule", "notes",
   "prompts": [{"id", "model", "ids"}],
   "cases": [{"model", "dtype", "prompt", "press", "kvpress", "decoding_method": {catalog config},
              "compression_interval", "target_size", "hidden_states_buffer_size", "merge_budget", "max_new_tokens",
              "ids": [greedy ids], "events": [{"decode_step", "k_len": [per layer], "merges": Σ M over layers,
              "tie": bool, "p_edge": bool, "kept": [[[pos...] per KV head] per layer],
              "value_sums": [[[Σ value row per kept entry, cache order] per KV head] per layer]}],
              "boundary_tie": bool, "p_edge": bool}]}

How it runs: as decoding.py (one prefill of the whole prompt under the press, then one forward per generated token at
the next original position, no stop token, sdpa so CAMPress computes the step's attention itself). The Bernoulli merge
draws cannot be reproduced outside torch's global RNG, so torch.bernoulli is replaced while a case runs by the
deterministic rule M = (P >= 0.5); kvaudit's parity test injects the same rule (runners/unit/cam_merging.h
MergeDrawRule). Events: every CAMPress.compress call (the wrapper is on the instance), recorded at the end of the step;
CAMPress gathers the kept rows in ascending index order, so its cache stays in position order (kvaudit's order) and
kept positions are the input rows matched (exact bytes) to the output rows. value_sums: the post-merge value rows of
each head summed in float64, in cache order, so a wrong window, scale or rounding shows. tie: the mean score
(CAMPress's selection key) has equal values, or values within 1e-6 relative (a few f32 ulps), across the target_size
cut (torch.topk's tie order or a last-ulp difference of a reimplementation's scores decides). p_edge: some merge probability lies within 1e-3 of the rule's 0.5
(a few ulps of difference in the attention sums could flip that merge). Each case runs twice and must agree.

Rerun: tools/.venv-kvpress/bin/python tools/golden/kvpress_groups/cam.py   (a few seconds on one core)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import DynamicCache

from kvpress import CAMPress, KnormPress, SnapKVPress

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_kvpress_golden import attention_context, load  # noqa: E402
from decoding import (MODELS, PROMPT_LENGTH, VOCAB_HIGH, VOCAB_LOW, apply, plain, run_facts,  # noqa: E402
                      write_document)

SEED = 20261203
MAX_NEW_TOKENS = 20
DECODING_WINDOW = 3
REPO = Path(__file__).resolve().parents[3]
OUT = REPO / "tests" / "golden" / "kvpress" / "kept_decoding_cam.json"
RULE = "M = (P >= 0.5)"


def deterministic_bernoulli(p, *args, **kwargs):
    assert not args and not kwargs, "CAMPress calls torch.bernoulli(p) only"
    return (p >= 0.5).to(p.dtype)


def press_table():
    """(label, factory() -> (press, base press), decoding method, interval, target, merge budget)."""
    snapkv = {"id": "snapkv", "variant": "kvpress",
              "params": {"window": DECODING_WINDOW, "kernel_size": 5, "pooling": "avg"}, "scorer": None}

    def cam(base_factory, interval, target, budget):
        def factory():
            base = base_factory()
            return CAMPress(base_press=base, compression_interval=interval, target_size=target,
                            merge_budget=budget), base
        return factory

    return [
        # Every 4 steps from 44 entries down to 24, then 28 -> 24: every evicted entry is a candidate.
        ("cam(knorm,interval=4,target=24,budget=4)", cam(KnormPress, 4, 24, 4), plain("knorm"), 4, 24, 4),
        (f"cam(snapkv(window={DECODING_WINDOW}),interval=4,target=24,budget=3)",
         cam(lambda: SnapKVPress(window_size=DECODING_WINDOW), 4, 24, 3), snapkv, 4, 24, 3),
        # Interval reached at 44 = target entries: CAMPress keeps counting and compresses at step 5 (c = 5 > n_evict).
        ("cam(knorm,interval=4,target=44,budget=2)", cam(KnormPress, 4, 44, 2), plain("knorm"), 4, 44, 2),
        # One candidate per step (per-step CaM) with a wide window cut at the kept list's end.
        ("cam(knorm,interval=1,target=28,budget=8)", cam(KnormPress, 1, 28, 8), plain("knorm"), 1, 28, 8),
    ]


def wrap(press, base, log: list, draws: list):
    original_compress = type(press).compress
    original_score = type(base).score
    last = {}

    def score(module, hidden_states, keys, values, attentions, kwargs):
        s = original_score(base, module, hidden_states, keys, values, attentions, kwargs)
        last["s"] = s.clone()
        return s

    def compress(module, hidden_states, keys, values, attentions, kwargs):
        last.pop("s", None)
        draws.clear()
        in_k = keys[0].clone()
        out_k, out_v = original_compress(press, module, hidden_states, keys, values, attentions, kwargs)
        merges = sum(int(m.sum()) for _, m in draws)
        edge = any(bool(((p.float() - 0.5).abs() < 1e-3).any()) for p, _ in draws)
        tie = False
        if "s" in last:
            mean = last["s"].mean(dim=1)[0].float()
            ordered = mean.sort(descending=True).values
            n = press.target_size
            # Equal, or within a few f32 ulps (our scorers' sums run in another order than torch's).
            tie = n < ordered.numel() and bool((ordered[n - 1] - ordered[n]).abs() <= 1e-6 * ordered[n].abs())
        log.append({"layer": module.layer_idx, "in": in_k, "out": out_k[0].clone(),
                    "values": out_v[0].double().sum(dim=-1).tolist(), "merges": merges, "edge": edge, "tie": tie})
        return out_k, out_v

    def bernoulli(p, *args, **kwargs):
        m = deterministic_bernoulli(p, *args, **kwargs)
        draws.append((p.clone(), m.clone()))
        return m

    base.score = score
    press.compress = compress
    return bernoulli


@torch.no_grad()
def run_case(model, ids, factory, where):
    press, base = factory()
    log, draws = [], []
    bernoulli = wrap(press, base, log, draws)
    n_layers = model.config.num_hidden_layers
    hkv = model.config.num_key_value_heads
    cache = DynamicCache()
    generated, events = [], []
    original_bernoulli = torch.bernoulli
    torch.bernoulli = bernoulli
    try:
        with attention_context("sdpa"), press(model):
            out = model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
            assert not log, f"{where}: CAMPress compressed during the prefill"
            positions = [[list(range(len(ids))) for _ in range(hkv)] for _ in range(n_layers)]
            generated.append(int(out.logits[0, -1].argmax()))
            next_position = len(ids)
            tie = edge = False
            for step in range(1, MAX_NEW_TOKENS):
                out = model(input_ids=torch.tensor([[generated[-1]]]), past_key_values=cache,
                            position_ids=torch.tensor([[next_position]]), use_cache=True)
                for layer in positions:
                    for p in layer:
                        p.append(next_position)
                next_position += 1
                if log:
                    k_len = [len(positions[layer][0]) for layer in range(n_layers)]
                    merges, event_tie, event_edge = 0, False, False
                    value_sums = [None] * n_layers
                    compressed = set()
                    for entry in log:
                        layer = entry["layer"]
                        compressed.add(layer)
                        positions[layer] = apply(positions[layer], entry, f"{where} step {step}")
                        for h in range(hkv):
                            assert positions[layer][h] == sorted(positions[layer][h]), \
                                f"{where}: CAMPress left its cache out of position order"
                        merges += entry["merges"]
                        event_tie |= entry["tie"]
                        event_edge |= entry["edge"]
                        value_sums[layer] = entry["values"]
                    for layer in range(n_layers):  # layers not compressed this step: their current values
                        if layer not in compressed:
                            value_sums[layer] = cache.layers[layer].values[0].double().sum(dim=-1).tolist()
                    tie |= event_tie
                    edge |= event_edge
                    events.append({"decode_step": step, "k_len": k_len, "merges": merges, "tie": event_tie,
                                   "p_edge": event_edge, "kept": [[list(p) for p in layer] for layer in positions],
                                   "value_sums": value_sums})
                    log.clear()
                generated.append(int(out.logits[0, -1].argmax()))
    finally:
        torch.bernoulli = original_bernoulli
    for layer, layer_positions in enumerate(positions):
        for h, p in enumerate(layer_positions):
            assert len(p) == cache.layers[layer].keys.shape[2], f"{where}: layer {layer} head {h} length"
    return generated, events, tie, edge


def main() -> int:
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(SEED)
    prompts, cases = [], []
    for model_name, dtype_name in MODELS:
        prompt = {"id": f"{model_name}-{dtype_name}-p0", "model": model_name,
                  "ids": [int(x) for x in rng.integers(VOCAB_LOW, VOCAB_HIGH, PROMPT_LENGTH)]}
        prompts.append(prompt)
        model = load(model_name, dtype_name, "sdpa")
        for label, factory, decoding_method, interval, target, budget in press_table():
            where = f"{prompt['id']} {label}"
            runs = [run_case(model, prompt["ids"], factory, where) for _ in range(2)]
            assert runs[0] == runs[1], f"{where}: two runs differ"
            generated, events, tie, edge = runs[0]
            cases.append({"model": model_name, "dtype": dtype_name, "prompt": prompt["id"], "press": label,
                          "kvpress": repr(factory()[0]), "decoding_method": decoding_method,
                          "compression_interval": interval, "target_size": target,
                          "hidden_states_buffer_size": 256, "merge_budget": budget,
                          "max_new_tokens": MAX_NEW_TOKENS, "ids": generated, "events": events,
                          "boundary_tie": tie, "p_edge": edge})
            print(f"{where}: {len(events)} events, {sum(e['merges'] for e in events)} merges, tie={tie}, "
                  f"p_edge={edge}", file=sys.stderr)
    doc = {
        "generator": "tools/golden/kvpress_groups/cam.py",
        "seed": SEED,
        **run_facts(),
        "draw_rule": RULE,
        "notes": [
            "one prefill of the whole prompt under the press, then one forward per generated token at the next "
            "original position; no stop token",
            "torch.bernoulli replaced by the deterministic rule " + RULE + " while a case runs",
            "events: every CAMPress compression; kept[l][h] ascending original positions after it; k_len[l] the "
            "cache length before it; merges: passed draws (M = 1) over every layer; value_sums[l][h][i]: sum of "
            "the value row of the i-th entry (cache = position order) after the merge",
        ],
        "prompts": prompts,
        "cases": cases,
    }
    write_document(OUT, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
