"""Press group kvzap: KVzapPress and DMSPress (kvpress 0.5.5 kvpress/presses/kvzap_press.py, dms_press.py)
-> tests/golden/kvpress/kept_kvzap.json.

Run from the repository root: tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group kvzap
(see that script's docstring for the document shape and the group hooks). C++ side: methods/kvzap.h,
methods/kvzap_model.h; parity test tests/methods/kvpress_parity_test.cpp.

KVzapPress is a ScorerPress whose scores come from a small learned surrogate applied to the attention input. kvpress
downloads the surrogate from the hub (post_init_from_model: KVzapModel.from_pretrained("nvidia/KVzap-<model_type>-
<model name>")); here post_init_from_model is replaced, per press instance, by KVzapModel.from_pretrained(<local
dir>) of the synthetic surrogates in tests/golden/artefacts/kvzap_{mlp,linear}_tiny (made by
tools/golden/make_artefacts_golden.py with kvpress's own KVzapModel and save_pretrained), i.e. kvpress's own loader
on the hub's file layout. The C++ method gets the same model.safetensors through its `model` parameter (written
relative to the repository root; the parity test resolves it against the source tree). One file serves every tiny
model (all have 2 layers, hidden size 64 and 2 KV heads).

DMSPress (prefill form, decoding=False: kvpress's dense-prefill DMS) wraps KVzapPress (the pairing kvpress's KVzap
README uses) and KnormPress; its budget is a score threshold (budget axis "threshold": the cases carry "threshold"
and compression 0) with sliding_window_size = DMS_WINDOW. It masks (self_attn.masked_key_indices): kept = complement.
The thresholds sit inside each scorer's score range on these prompts (synthetic KVzap mlp scores about -0.25..0.37,
Knorm's -||k|| about -6..-3.7), both signs for KVzap. The kept sets are checked here against the rule restated in
methods/dms.h (the last DMS_WINDOW positions, and every earlier one whose recorded score is not below T).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from kvpress import DMSPress, KnormPress, KVzapPress
from kvpress.presses.kvzap_press import KVzapModel

REPO = Path(__file__).resolve().parents[3]
ARTEFACTS = "tests/golden/artefacts"
MODEL_DIRS = {"mlp": f"{ARTEFACTS}/kvzap_mlp_tiny", "linear": f"{ARTEFACTS}/kvzap_linear_tiny"}

DMS_WINDOW = 32
NEAR_THRESHOLD = 2.0 ** -10  # relative distance to T flagged in bf16 models (boundary_tie)
DMS_THRESHOLDS = {"kvzap": [-0.1, 0.1, 0.3], "knorm": [-5.5, -4.8, -4.2]}
MASKED_KINDS = {"dms"}

NOTES = [
    f"dms: DMSPress(press, threshold, sliding_window_size={DMS_WINDOW}) in its prefill form; cases carry "
    "\"threshold\" (compression 0); kept = complement of masked_key_indices, checked against the rule (window + "
    "scores not below the threshold); boundary_tie for dms: a bf16 model's scored position lies within a "
    "relative 2^-10 of the threshold, where one-step differences of another runtime's keys or hidden states "
    "can move it across",
    "kvzap group: KVzapPress with the synthetic surrogates of tests/golden/artefacts/kvzap_{mlp,linear}_tiny "
    "(kvpress's KVzapModel, seeded default initialisation), loaded with KVzapModel.from_pretrained from the local "
    "directory instead of the hub; the method configs name the same model.safetensors relative to the repository "
    "root",
]


def kvzap_press(cr, model_type):
    press = KVzapPress(compression_ratio=cr, model_type=model_type)

    def post_init_from_model(model):
        if getattr(press, "kvzap_model", None) is None:
            press.kvzap_model = KVzapModel.from_pretrained(str(REPO / MODEL_DIRS[model_type]))
            press.kvzap_model_name = MODEL_DIRS[model_type]

    press.post_init_from_model = post_init_from_model
    return press


def dms_press(threshold, inner):
    return DMSPress(press=inner(), threshold=threshold, sliding_window_size=DMS_WINDOW)


def plain(method_id, variant=None, **params):
    return {"id": method_id, "variant": variant, "params": params, "scorer": None}


def run_press(model, attn, ids, press):
    main = sys.modules["__main__"]
    keys = main.prefill(model, attn, ids, press)[0]
    if isinstance(press, DMSPress):
        # Per-call state (score tensors, realised ratios): keep it out of the case's "kvpress" description.
        press.scores_buffer, press.compression_ratios = {}, {}
    return keys


def budget_axis(label):
    for scorer, thresholds in DMS_THRESHOLDS.items():
        if label == f"dms({scorer})":
            return ("threshold", thresholds)
    return None


_last = {}


def check_budget(label, kind, press, kept, length, cr, where):
    if kind != "dms":
        return False
    _last["press"] = press
    window = set(range(max(0, length - press.sliding_window_size), length))
    for layer, per_head in enumerate(kept):
        for head, positions in enumerate(per_head):
            assert window <= set(positions), f"{where}: layer {layer} head {head} lost a window position"
    return True


def boundary_tie(kind, press, log, kept, cr):
    """A score exactly at T is kept by the rule itself (not s < T): no choice is left to an order. But in bf16
    models a C++ runtime's keys / hidden states can differ from HF's by one bf16 step (docs in the parity test), so
    a scored position within NEAR_THRESHOLD (relative) of T may legitimately fall on the other side: flagged."""
    if kind != "dms":
        return None
    for entry in log:
        if entry["role"] != "inner":
            continue
        scores = entry["raw"][0].float()
        if entry["module"].q_proj.weight.dtype != torch.bfloat16:
            continue
        scored = max(0, entry["length"] - press.sliding_window_size)
        near = (scores[:, :scored] - press.threshold).abs() <= abs(press.threshold) * NEAR_THRESHOLD
        if bool(near.any()):
            return True
    return False


def check_against_scores(kind, log, kept, tie, where):
    if kind != "dms":
        return False
    press = _last["press"]
    inner = [e for e in log if e["role"] == "inner"]
    assert len(inner) == len(kept), f"{where}: {len(inner)} score calls for {len(kept)} layers"
    for entry in inner:
        scores = entry["raw"][0]
        length = entry["length"]
        scored = max(0, length - press.sliding_window_size)
        threshold = torch.tensor(press.threshold, dtype=scores.dtype)
        for head, positions in enumerate(kept[entry["layer"]]):
            want = [t for t in range(length) if t >= scored or not bool(scores[head, t] < threshold)]
            assert positions == want, f"{where}: layer {entry['layer']} head {head}: kept set is not the DMS rule"
    return True


def press_table():
    """(label, registry, factory(cr), method, attn, kind) as the main script's press_table()."""
    return [
        (f"kvzap({model_type})", None, (lambda mt: (lambda cr: kvzap_press(cr, mt)))(model_type),
         plain("kvzap", model=f"{MODEL_DIRS[model_type]}/model.safetensors"), "sdpa", "scorer")
        for model_type in ("mlp", "linear")
    ] + [
        ("dms(kvzap)", None, lambda t: dms_press(t, lambda: kvzap_press(0.0, "mlp")),
         {"id": "dms", "variant": None, "params": {"sliding_window_size": DMS_WINDOW},
          "scorer": plain("kvzap", model=f"{MODEL_DIRS['mlp']}/model.safetensors")}, "sdpa", "dms"),
        ("dms(knorm)", None, lambda t: dms_press(t, KnormPress),
         {"id": "dms", "variant": None, "params": {"sliding_window_size": DMS_WINDOW},
          "scorer": plain("knorm")}, "sdpa", "dms"),
    ]
