"""Press group merging: MergingPress (kvpress 0.5.5) -> tests/golden/kvpress/kept_merging.json.

Run from the repository root: nice tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group merging
(see that script's docstring for the document shape and the group hooks). C++ side: methods/merging.h (the method),
runners/cpu/sequence_state.h replace_values (the CPU cache); tests: tests/methods/merging_test.cpp (the formula by
hand, and on kvpress's own merge inputs recorded here), tests/methods/kvpress_parity_test.cpp (kept sets; the CPU
cache's merged values after a real prefill).

Cases (every model/dtype/protocol of the main script; compression 0.25, 0.5, 0.75, 0.9; sdpa): MergingPress over
KnormPress and over SnapKVPress(window_size=16), each with the defaults (similarity_threshold 0, merge_fraction 1)
and with similarity_threshold 0.2, merge_fraction 0.75 (both gates active).
Besides the kept sets each case carries, from kvpress's own MergingPress.merge call of each layer (recorded by
wrapping the press instance's compress/merge):
  "merged" [layer][head]: the kept positions whose value the merge changed (ascending);
  "merged_sum" [layer][head][d]: the sum, over those positions in ascending order, of the merged value rows (f32).
The merging(knorm...) cases of prompt llama-p0 (f32) and llama-bf16-p0 at cr 0.75, query-agnostic, carry
"merge_inputs": the merge's
inputs and output, {"keys", "values": [layer][head][L][d] (the full pre-merge cache, model dtype widened to f32),
"kept_ranked": [layer][head][n] (topk order, as kvpress passes it), "merged_values": [layer][head][len(merged)][d]}.
Boundary ties: the main script's "scorer" rule on the inner press's scores (the merge does not move the cut).
"""

from __future__ import annotations

import numpy as np
import torch
from kvpress import KnormPress, SnapKVPress
from kvpress.presses.merging_press import MergingPress

SMALL_WINDOW = 16
INPUTS_CR = 0.75
CONTEXT_LENGTH = 128
NON_DEFAULT = {"similarity_threshold": 0.2, "merge_fraction": 0.75}

NOTES = [
    "merging group: MergingPress(knorm) and MergingPress(snapkv(window=16)), defaults and similarity_threshold 0.2 / "
    "merge_fraction 0.75; keys are never changed by the merge, so kept sets come from the usual key-row matching",
    "merged [layer][head]: kept positions whose value kvpress's merge changed; merged_sum [layer][head][d]: the sum "
    "of those merged value rows (f32, ascending positions); merge_inputs (llama-p0 f32 and llama-bf16-p0, cr 0.75, "
    "query-agnostic): the keys/values the merge received, the kept indices in topk order and the merged rows",
    "in bf16 a merged row can round back to its old value, so 'merged' lists only rows that changed; in layer 0 "
    "of these random prompts a repeated token id has the same value row everywhere, so merging one copy into "
    "another is a no-op up to the last bit (kvpress may list such a row, we may not: the parity test discounts "
    "no-op merges)",
    "parity (C++): the merge formula on the merge_inputs reproduces kvpress's changed rows exactly (same positions; "
    "f32 values within 2.4e-7 of the row's largest magnitude, bf16 bit-identical); after a real prefill with our "
    "CpuModel every f32 head holds kvpress's merged rows (sums within 1e-6 relative); bf16 heads differ where our "
    "bf16 keys/values differ from transformers' by a bf16 step (a near-tied target or a rounding moves)",
]


def snap(window=SMALL_WINDOW):
    return {"id": "snapkv", "variant": "kvpress",
            "params": {"window": window, "kernel_size": 5, "pooling": "avg"}, "scorer": None}


KNORM = {"id": "knorm", "variant": None, "params": {}, "scorer": None}


def press_table():
    """(label, registry, factory(cr), method, attn, kind)."""
    table = []
    scorers = (("knorm", KNORM, lambda cr: KnormPress(compression_ratio=cr)),
               (f"snapkv(window={SMALL_WINDOW})", snap(),
                lambda cr: SnapKVPress(compression_ratio=cr, window_size=SMALL_WINDOW)))
    for label, scorer, make in scorers:
        for params in ({}, NON_DEFAULT):
            full = {"similarity_threshold": 0.0, "merge_fraction": 1.0, **params}
            suffix = "".join(f",{k}={v}" for k, v in params.items())
            table.append((f"merging({label}{suffix})", None,
                          lambda cr, make=make, full=full: MergingPress(press=make(cr), **full),
                          {"id": "merging", "variant": None, "params": full, "scorer": scorer}, "sdpa", "scorer"))
    return table


# ------------------------------------------------------------------------------------------------------------------
# Hooks (make_kvpress_golden.py).

def golden():
    import __main__
    return __main__


def install_recorders(press, log):
    # The inner press's scores decide the kept set: record them as the "outer" scores of the main script's
    # "scorer" kind (tie flag, top-k cross-check).
    press.press.score = golden().ScoreRecorder(press.press, "outer", log)
    return True


INPUTS_WRITTEN = set()
MERGES = {}  # id(press) -> [(layer, keys [Hkv, L, d], values, kept indices [Hkv, n], merged values [Hkv, L, d])]


def run_press(model, attn, ids, press):
    calls = []
    state = {}
    original_compress, original_merge = press.compress, press.merge

    def compress(module, hidden_states, keys, values, attentions, kwargs):
        state["layer"] = module.layer_idx
        return original_compress(module, hidden_states, keys, values, attentions, kwargs)

    def merge(keys, values, indices):
        out_keys, out_values = original_merge(keys, values, indices)
        calls.append((state["layer"], keys[0].clone(), values[0].clone(), indices[0].clone(), out_values[0].clone()))
        return out_keys, out_values

    press.compress, press.merge = compress, merge
    cache = golden().prefill(model, attn, ids, press)[0]
    calls.sort(key=lambda c: c[0])
    assert [c[0] for c in calls] == list(range(len(cache))), "merge was not called once per layer"
    MERGES[id(press)] = calls
    return cache


def short_floats(tensor):
    """Nested lists of the f32 values, each the shortest decimal that reads back to the same f32."""
    flat = [float(str(np.float32(v))) for v in tensor.float().reshape(-1).tolist()]
    out = torch.tensor(flat, dtype=torch.float64).reshape(tensor.shape)
    assert torch.equal(out.float(), tensor.float())
    return out.tolist()


def merged_positions(values, kept, merged_values):
    """Per head: the kept positions (ascending) whose row changed."""
    out = []
    for h in range(values.shape[0]):
        rows = sorted(kept[h].tolist())
        out.append([p for p in rows if not torch.equal(values[h, p], merged_values[h, p])])
    return out


def case_extra(label, kind, press):
    calls = MERGES[id(press)]
    merged, sums = [], []
    for _, keys, values, kept, out in calls:
        per_head = merged_positions(values, kept, out)
        merged.append(per_head)
        layer_sums = []
        for h, positions in enumerate(per_head):
            total = torch.zeros(values.shape[-1], dtype=torch.float32)
            for p in positions:
                total = total + out[h, p].float()
            layer_sums.append(short_floats(total))
        sums.append(layer_sums)
    extra = {"merged": merged, "merged_sum": sums}
    # case_extra does not see the prompt: the main loop runs the prompts in order, and llama-p0 / llama-bf16-p0 are
    # the first f32 / bf16 prompts, so the first query-agnostic (L = 128) case of each (dtype, label) at cr 0.75 is
    # theirs.
    dtype = "bf16" if calls[0][2].dtype == torch.bfloat16 else "f32"
    key = (dtype, label)
    if label.startswith("merging(knorm") and abs(press.compression_ratio - INPUTS_CR) < 1e-12 and \
            calls[0][1].shape[1] == CONTEXT_LENGTH and key not in INPUTS_WRITTEN:
        INPUTS_WRITTEN.add(key)
        extra["merge_inputs"] = merge_inputs(calls)
    return extra


def merge_inputs(calls):
    inputs = {"keys": [], "values": [], "kept_ranked": [], "merged_values": []}
    for _, keys, values, kept, out in calls:
        inputs["keys"].append(short_floats(keys))
        inputs["values"].append(short_floats(values))
        inputs["kept_ranked"].append(kept.tolist())
        heads = []
        for h, positions in enumerate(merged_positions(values, kept, out)):
            heads.append(short_floats(out[h, positions]) if positions else [])
        inputs["merged_values"].append(heads)
    return inputs
