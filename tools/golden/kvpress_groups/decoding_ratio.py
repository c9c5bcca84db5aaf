#!/usr/bin/env python3
"""kvpress CompressionRatioDecodingPress golden (decode-time compression to a fraction of every token seen).

A script of its own like decoding.py (whose run_case, prompt and document helpers it reuses); writes
tests/golden/kvpress/kept_decoding_ratio.json (the kept_decoding* prefix keeps it out of kvpress_parity_test.cpp's
one-shot goldens), read by tests/methods/kvpress_decoding_parity_test.cpp (KvpressDecodingRatioParity):
  the document shape of kept_decoding.json, except that a case has "target_compression_ratio" instead of
  "target_size", and every event also has "total_tokens_seen" (max(position_ids) + 1 of the step) and
  "target_size" (kvpress's own CompressionRatioDecodingPress._resolve_target_size of that step).

kvpress 0.5.5 compression_ratio_decoding_press.py: a DecodingPress whose target is re-evaluated at every decode step
as max(1, int(total_tokens_seen * (1 - target_compression_ratio))), total_tokens_seen = max(position_ids) + 1 (the
press raises NotImplementedError without position_ids: the driver passes the next original position at every step,
so a run that finishes shows they reached the hook). DecodingPress.forward_hook compresses when
layer_step_count >= compression_interval OR q_len >= target_size; with one token per decode step the second
condition holds when the target is 1 (the "every step" case below, ratio 0.98: int(T * 0.02) < 2 for T < 100).

Cases (interval 4, buffer 256, 40-token prompts, 20 new tokens; llama f32 and bf16, qwen2 f32):
  CompressionRatioDecodingPress(KnormPress, 0.5), CompressionRatioDecodingPress(SnapKVPress(window_size=3), 0.5),
  CompressionRatioDecodingPress(KnormPress, 0.98) (target 1: compresses at every step),
  PrefillDecodingPress(SnapKVPress(0.5, window_size=8), CompressionRatioDecodingPress(KnormPress, 0.5)) (the prefill
  evicts half the prompt; the target still counts every token seen, evicted or not).
Checks here: two runs agree; every event keeps min(k_len, target_size) per head; the target of the cache-length
rule max(1, int(k_len * (1 - r))) differs from kvpress's at some evicting event of every case but the 0.98 ones (target
1 either way), so a reimplementation using it fails the parity test.

Rerun: tools/.venv-kvpress/bin/python tools/golden/kvpress_groups/decoding_ratio.py   (a few seconds on one core)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import transformers

from kvpress import CompressionRatioDecodingPress, KnormPress, PrefillDecodingPress, SnapKVPress

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_kvpress_golden import load  # noqa: E402
import decoding  # noqa: E402
from decoding import (DECODING_WINDOW, INTERVAL, MAX_NEW_TOKENS, MODELS, PREFILL_CR, PREFILL_WINDOW,  # noqa: E402
                      PROMPT_LENGTH, VOCAB_HIGH, VOCAB_LOW, plain, run_case, run_facts, write_document)

SEED = 20261205
RATIO = 0.5
EVERY_STEP_RATIO = 0.98
BUFFER = 256
REPO = Path(__file__).resolve().parents[3]
OUT = REPO / "tests" / "golden" / "kvpress" / "kept_decoding_ratio.json"


def press_table():
    """(label, factory() -> (press, base press, prefill press or None), decoding press factory, ratio,
    decoding method, prefill method)."""
    def ratio_press(base, ratio):
        return CompressionRatioDecodingPress(base_press=base, compression_interval=INTERVAL,
                                             hidden_states_buffer_size=BUFFER, target_compression_ratio=ratio)

    def knorm(ratio):
        def factory():
            base = KnormPress()
            return ratio_press(base, ratio), base, None
        return factory

    def snapkv_decoding():
        base = SnapKVPress(window_size=DECODING_WINDOW)
        return ratio_press(base, RATIO), base, None

    def prefill_snapkv_then_knorm():
        base = KnormPress()
        prefill = SnapKVPress(compression_ratio=PREFILL_CR, window_size=PREFILL_WINDOW)
        return PrefillDecodingPress(prefilling_press=prefill, decoding_press=ratio_press(base, RATIO)), base, prefill

    snapkv = {"id": "snapkv", "variant": "kvpress",
              "params": {"window": PREFILL_WINDOW, "kernel_size": 5, "pooling": "avg"}, "scorer": None}
    snapkv_window = {"id": "snapkv", "variant": "kvpress",
                     "params": {"window": DECODING_WINDOW, "kernel_size": 5, "pooling": "avg"}, "scorer": None}
    return [
        (f"ratio_decoding(knorm,{RATIO})", knorm(RATIO), RATIO, plain("knorm"), None),
        (f"ratio_decoding(snapkv(window={DECODING_WINDOW}),{RATIO})", snapkv_decoding, RATIO, snapkv_window, None),
        (f"ratio_decoding(knorm,{EVERY_STEP_RATIO})", knorm(EVERY_STEP_RATIO), EVERY_STEP_RATIO, plain("knorm"),
         None),
        (f"prefill_decoding(snapkv(window={PREFILL_WINDOW}),ratio_decoding(knorm,{RATIO}))",
         prefill_snapkv_then_knorm, RATIO, plain("knorm"), snapkv),
    ]


def kvpress_target(ratio: float, total_tokens_seen: int) -> int:
    """kvpress's own target rule, through a fresh press (its _resolve_target_size reads position_ids)."""
    press = CompressionRatioDecodingPress(base_press=KnormPress(), target_compression_ratio=ratio)
    return press._resolve_target_size({"position_ids": torch.tensor([[total_tokens_seen - 1]])})


def annotate(events, ratio, where):
    """Adds total_tokens_seen and target_size to each event; checks the kept counts; returns whether the
    cache-length rule max(1, int(k_len * (1 - r))) would have kept another count at some evicting event."""
    k_len_rule_differs = False
    for event in events:
        # Decode step s feeds the token at original position PROMPT_LENGTH + s - 1.
        seen = PROMPT_LENGTH + event["decode_step"]
        target = kvpress_target(ratio, seen)
        event["total_tokens_seen"] = seen
        event["target_size"] = target
        for layer, k in zip(event["kept"], event["k_len"]):
            for head in layer:
                assert len(head) == min(k, target), f"{where} step {event['decode_step']}: kept count"
            if k > target and max(1, int(k * (1 - ratio))) != target:
                k_len_rule_differs = True
    return k_len_rule_differs


def main() -> int:
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    assert decoding.MAX_NEW_TOKENS == MAX_NEW_TOKENS
    rng = np.random.default_rng(SEED)
    prompts, cases = [], []
    for model_name, dtype_name in MODELS:
        prompt = {"id": f"{model_name}-{dtype_name}-r0", "model": model_name,
                  "ids": [int(x) for x in rng.integers(VOCAB_LOW, VOCAB_HIGH, PROMPT_LENGTH)]}
        prompts.append(prompt)
        model = load(model_name, dtype_name, "sdpa")
        for label, factory, ratio, decoding_method, prefill_method in press_table():
            where = f"{prompt['id']} {label}"
            runs = [run_case(model, prompt["ids"], factory, where) for _ in range(2)]
            assert runs[0] == runs[1], f"{where}: two runs differ"
            generated, prefill_kept, prefill_tie, events, tie = runs[0]
            ordered = run_case(model, prompt["ids"], factory, where, position_order=True)
            differs = annotate(events, ratio, where)
            annotate(ordered[3], ratio, where + " (position order)")
            # With target 1 at every step both rules give 1; every other case must tell them apart.
            assert differs or ratio == EVERY_STEP_RATIO, \
                f"{where}: the cache-length rule keeps the same counts (the case cannot tell them apart)"
            position_order = None
            if (ordered[0], ordered[3]) != (generated, events):
                position_order = {"ids": ordered[0], "events": ordered[3], "boundary_tie": ordered[4]}
            cases.append({"model": model_name, "dtype": dtype_name, "prompt": prompt["id"], "press": label,
                          "kvpress": repr(factory()[0]), "prefill_method": prefill_method,
                          "prefill_compression": PREFILL_CR if prefill_method else 0.0,
                          "decoding_method": decoding_method, "compression_interval": INTERVAL,
                          "target_compression_ratio": ratio, "hidden_states_buffer_size": BUFFER,
                          "max_new_tokens": MAX_NEW_TOKENS, "ids": generated, "prefill_kept": prefill_kept,
                          "prefill_tie": prefill_tie,
                          "events": events, "boundary_tie": tie, "position_order": position_order})
            print(f"{where}: {len(events)} events, tie={tie}, position order changes it: "
                  f"{position_order is not None}", file=sys.stderr)
    doc = {
        "generator": "tools/golden/kvpress_groups/decoding_ratio.py",
        "seed": SEED,
        **run_facts(),
        "notes": [
            "one prefill of the whole prompt under the press, then one forward per generated token at the next "
            "original position (position_ids passed: CompressionRatioDecodingPress reads them); no stop token",
            "events: every time DecodingPress's trigger fired (step count >= compression_interval, or q_len = 1 >= "
            "target_size); kept[l][h] ascending original positions after it; k_len[l] the cache length it "
            "compressed; total_tokens_seen = max(position_ids) + 1 of the step; target_size = "
            "max(1, int(total_tokens_seen * (1 - target_compression_ratio)))",
            "position_order: the same case with kvpress's compressed cache re-sorted into position order after "
            "every compression (kvaudit's order), recorded only where it changes ids or events",
        ],
        "prompts": prompts,
        "cases": cases,
    }
    write_document(OUT, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
