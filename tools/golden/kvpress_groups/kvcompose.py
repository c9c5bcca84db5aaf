"""Press group kvcompose: KVComposePress (kvpress 0.5.5; structured and unstructured, non-default aggregations)
-> tests/golden/kvpress/kept_kvcompose.json.

Run from the repository root: nice tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group kvcompose
(see that script's docstring for the document shape and the group hooks). C++ side: methods/kvcompose.h (the method
and its extra pass, methods/extra_pass.h); parity test tests/methods/kvpress_parity_test.cpp, which runs the pass as
the unit runner does.

What KVComposePress does (restated; kvpress/presses/kvcompose_press.py): inside `with press(model):` the model's
forward is replaced; it prefills the b cached tokens in eager attention, then runs the SAME b tokens a second time on
top of that cache (positions b..2b-1; kvpress's register_prompt_ids is never called by the pipeline, so the "task"
queries are the repeated context). A forward hook on every attention module records, for that second forward only
(the prefill's square attention is skipped), each query head's attention weights of the b repeated rows on the b
cached columns (the softmax runs over the b cached keys and the repeated rows' own causal keys). Selection happens
when the context manager exits (kvaudit's method/extra pass: methods/kvcompose.h has the formula).

Kept sets: structured=True replaces each layer's cache by the per-head kept rows of the first b entries (the
repeated rows are dropped), so rows are matched to the full keys as for pruning presses. structured=False leaves the
2b-entry cache (the repeated context stays, a kvpress quirk) and masks evicted positions through
masked_key_indices (attention_patch.py): run_press() below checks that the cache's first b rows are the plain
prefill's keys and returns those, and kept = complement of masked_key_indices (MASKED_KINDS).
"""

from __future__ import annotations

import logging
import sys

import torch

import kvpress.presses.kvcompose_press as kvcompose_module
from kvpress import KVComposePress

# KVComposePress warns about its temporary 2x cache on every prefill.
logging.getLogger(kvcompose_module.__name__).setLevel(logging.ERROR)

MASKED_KINDS = {"kvcompose_unstructured"}
KINDS = {"kvcompose", "kvcompose_unstructured"}
LOWER_BOUND = 24  # keep_token_lower_bound of one structured case (above several layers' counts at cr 0.9)

NOTES = [
    "kvcompose group: KVComposePress prefills in eager, then runs the same cached tokens again on top of the cache "
    "(positions b..2b-1) and aggregates each query head's attention of those rows on the b cached positions "
    "(agg_task over rows, agg_group over a KV group's query heads); the C++ method runs that second forward as "
    "its extra pass (methods/kvcompose.h)",
    "kvcompose kept sets: structured=True shortens the cache to the kept rows of the first b entries (rows matched "
    "to the full keys); structured=False keeps the 2b-entry cache (the repeated context stays, as kvpress leaves it) "
    "and masks: kept = complement of masked_key_indices over the first b positions",
    "kvcompose budget: structured: n = max(1, int(layers*b*(1-cr))) composite tokens over all layers, per-layer "
    "count = how many of the layer's composite scores are in the global top-n, at least max(1, "
    "keep_token_lower_bound); every head of a layer keeps that count; unstructured: n = max(1, int(layers*Hkv*b*"
    "(1-cr))) over all heads' rank-ordered scores, each head keeps its share",
    "kvcompose boundary_tie: equal composite scores of different layers (heads) straddle the global top-n boundary "
    "(composite row 0 is the elementwise max over layers, so it copies other layers' values exactly), or equal "
    "token scores straddle a head's count",
    "kvcompose add_v_norm=True: kvpress 0.5.5 raises a shape error (enhance_scores multiplies the b scores by the "
    "norms of all 2b cached values, the repeated rows included); those cases run with enhance_scores patched to "
    "the first b values (the cached positions), which is what the C++ method computes",
    "kvcompose bf16: the token scores are aggregates of bf16 attention weights (and, with add_v_norm, bf16 value "
    "norms), so near-ties one bf16 step apart are common; the C++ parity runs on its own CpuModel, whose bf16 "
    "values and pass rows can differ from HF's by a bf16 step, which can swap such a pair at a head's boundary "
    "(one position of 13 in one head of the unstructured add_v_norm press at cr 0.9); f32 cases match exactly",
    f"kvcompose(keep_token_lower_bound={LOWER_BOUND}) adds 1e9 to the first {LOWER_BOUND} composite scores of every "
    "layer/head (in f32 they all become exactly 1e9: ties whenever the global boundary falls among them)",
]


# ----------------------------------------------------------------------------------------------------------------
# Recording what the press computed (before _reset_state clears it).

def install_recorders(press, log):
    if not isinstance(press, KVComposePress):
        return False
    original = type(press).prepare_important_masks

    def prepare_important_masks():
        original(press)
        log.append({"scores": press.scores.clone(),
                    "per_head": press.composite_scores_per_head.clone(),
                    "per_layer": press.composite_scores_per_layer.clone(),
                    "important_per_head": press.important_per_head.copy(),
                    "important_per_layer": press.important_per_layer.copy()})

    press.prepare_important_masks = prepare_important_masks
    if press.add_v_norm:
        # kvpress 0.5.5 multiplies the [b] scores by the norms of ALL cached values, which hold 2b rows after the
        # repeated pass, and raises a shape error; patched here to the first b rows (the cached positions).
        enhance = type(press).enhance_scores

        def enhance_scores():
            layers = press.cache.layers
            saved = [layer.values for layer in layers]
            for layer in layers:
                layer.values = layer.values[:, :, :press.context_len]
            try:
                enhance(press)
            finally:
                for layer, values in zip(layers, saved):
                    layer.values = values

        press.enhance_scores = enhance_scores
    return True


def run_press(model, attn, ids, press):
    main = sys.modules["__main__"]
    keys = main.prefill(model, attn, ids, press)[0]
    if isinstance(press, KVComposePress) and not press.structured:
        length = len(ids)
        assert all(k.shape[1] == 2 * length for k in keys), "unstructured kvcompose: expected a 2b-entry cache"
        # The repeated rows sit at positions b..2b-1: layer 0's keys depend on token and position only, so they
        # equal the keys of a plain prefill of ids + ids there.
        modules = main.attention_modules(model)
        masked = [m.masked_key_indices for m in modules]
        doubled = main.prefill(model, attn, list(ids) + list(ids))[0]  # (resets masked_key_indices)
        for module, indices in zip(modules, masked):
            module.masked_key_indices = indices
        assert torch.equal(keys[0][:, length:], doubled[0][:, length:]), "repeated rows are not at b..2b-1"
        keys = [k[:, :length].clone() for k in keys]
    return keys


# ----------------------------------------------------------------------------------------------------------------
# Budget and tie checks.

def _n_kept(numel, cr):
    return max(1, int(numel * (1 - cr)))


def _global_split_tie(composite, n_kept, bins_of):
    """A tie at the global top-n boundary whose tied entries lie in more than one bin (layer or head)."""
    flat = composite.reshape(-1)
    ordered = flat.sort(descending=True).values
    if not 0 < n_kept < flat.numel() or bool(ordered[n_kept - 1] != ordered[n_kept]):
        return False
    tied = (flat == ordered[n_kept]).nonzero().reshape(-1)
    return len(set(bins_of(tied).tolist())) > 1


def _head_count_tie(scores, count):
    ordered = scores.sort(descending=True).values
    return 0 < count < scores.numel() and bool(ordered[count - 1] == ordered[count])


def boundary_tie(kind, press, log, kept, cr):
    if kind not in KINDS:
        return None
    (entry,) = log
    scores = entry["scores"]
    n_layers, hkv, length = scores.shape
    if kind == "kvcompose":
        tie = _global_split_tie(entry["per_layer"], _n_kept(n_layers * length, cr), lambda i: i // length)
        counts = [[int(entry["important_per_layer"][l])] * hkv for l in range(n_layers)]
    else:
        tie = _global_split_tie(entry["per_head"], _n_kept(n_layers * hkv * length, cr), lambda i: i // length)
        counts = entry["important_per_head"].tolist()
    for layer in range(n_layers):
        for head in range(hkv):
            tie |= _head_count_tie(scores[layer, head], int(counts[layer][head]))
    return tie


def check_budget(label, kind, press, kept, length, cr, where):
    if kind not in KINDS:
        return False
    n_layers, hkv = len(kept), len(kept[0])
    counts = [[len(h) for h in layer] for layer in kept]
    floor = max(1, press.keep_token_lower_bound)
    if kind == "kvcompose":
        for layer in counts:
            assert len(set(layer)) == 1, f"{where}: structured heads of a layer keep {layer}"
        per_layer = [layer[0] for layer in counts]
        n = _n_kept(n_layers * length, cr)
        # Each layer keeps its share of the global top-n, raised to the floor (and capped at b).
        assert all(min(length, floor) <= c <= length for c in per_layer), f"{where}: per-layer counts {per_layer}"
        assert sum(per_layer) >= min(n, n_layers * length), f"{where}: {per_layer} keep fewer than {n}"
    else:
        total = sum(sum(layer) for layer in counts)
        assert total == _n_kept(n_layers * hkv * length, cr), f"{where}: unstructured kvcompose keeps {total}"
    return True


def check_against_scores(kind, log, kept, tie, where):
    if kind not in KINDS:
        return False
    if tie:
        return True
    (entry,) = log
    scores = entry["scores"]
    n_layers, hkv, length = scores.shape
    for layer in range(n_layers):
        for head in range(hkv):
            count = (int(entry["important_per_layer"][layer]) if kind == "kvcompose"
                     else int(entry["important_per_head"][layer, head]))
            count = min(count, length)
            expected = sorted(torch.topk(scores[layer, head], count).indices.tolist())
            assert expected == kept[layer][head], f"{where}: layer {layer} head {head} is not the top-{count}"
    return True


# ----------------------------------------------------------------------------------------------------------------

def kvcompose_method(structured=True, agg_task="max", agg_group="mean", agg_head="mean", add_v_norm=False,
                     add_mean_across_heads=True, keep_token_lower_bound=0):
    return {"id": "kvcompose", "variant": None,
            "params": {"structured": structured, "agg_task": agg_task, "agg_group": agg_group,
                       "agg_head": agg_head, "add_v_norm": add_v_norm,
                       "add_mean_across_heads": add_mean_across_heads,
                       "keep_token_lower_bound": keep_token_lower_bound},
            "scorer": None}


def press_table():
    """(label, registry, factory(cr), method, attn, kind) as the main script's press_table()."""
    other = dict(agg_task="mean", agg_group="max", agg_head="max")
    unstructured_other = dict(structured=False, agg_task="mean", add_mean_across_heads=False, add_v_norm=True)
    return [
        ("kvcompose", None, lambda cr: KVComposePress(compression_ratio=cr), kvcompose_method(), "eager",
         "kvcompose"),
        ("kvcompose(structured=False)", None, lambda cr: KVComposePress(compression_ratio=cr, structured=False),
         kvcompose_method(structured=False), "eager", "kvcompose_unstructured"),
        ("kvcompose(agg_task=mean,agg_group=max,agg_head=max)", None,
         lambda cr: KVComposePress(compression_ratio=cr, **other), kvcompose_method(**other), "eager",
         "kvcompose"),
        ("kvcompose(structured=False,agg_task=mean,add_v_norm=True,add_mean_across_heads=False)", None,
         lambda cr: KVComposePress(compression_ratio=cr, **unstructured_other),
         kvcompose_method(**unstructured_other), "eager", "kvcompose_unstructured"),
        (f"kvcompose(keep_token_lower_bound={LOWER_BOUND})", None,
         lambda cr: KVComposePress(compression_ratio=cr, keep_token_lower_bound=LOWER_BOUND),
         kvcompose_method(keep_token_lower_bound=LOWER_BOUND), "eager", "kvcompose"),
    ]
