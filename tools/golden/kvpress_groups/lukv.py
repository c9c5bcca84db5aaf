"""Press group lukv: LUKVPress and BlockPress over several scorers (kvpress 0.5.5) -> kept_lukv.json.

Run from the repository root: nice tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group lukv
(see that script's docstring for the document shape and the group hooks). C++ side: methods/lukv.h, methods/block.h,
methods/npy_file.h; parity test tests/methods/kvpress_parity_test.cpp.

LU-KV's budget curve: kvpress downloads it from a table keyed by (model.config.name_or_path, scorer class); only
Llama-3.1-8B with ExpectedAttention exists there. This module writes one synthetic curve per tiny model (numpy,
fixed seed; shape [99, layers, KV heads], float32) into tests/golden/kvpress/artefacts/lukv_curve_<model>.npy, adds
the (tiny model directory, scorer class) keys to kvpress's BUDGET_CURVE_URLS with the local path as "URL", and
replaces kvpress's load_budget_curve (a requests.get) by np.load(path, allow_pickle=False) -- kvpress's own
_load_budget_curves still runs, with its shape check. The C++ method configs name the same files (path parameter
`curve`, relative to the repository root).

Curve t (cr = (t + 1) / 100), layer l, KV head h: cr + 0.35 * min(cr, 1 - cr) * z[l, h] with z a fixed standard
normal draw per model, centred over (l, h), clipped to [0, 0.995]; two entries leave that range on purpose to
exercise kvpress's clamps: t = 24 (cr 0.25) layer 0 head 1 = -0.1 (keep rate clamped to 1) and t = 89 (cr 0.9)
layer 1 head 0 = 1.0 (keep count 0 before the clamp to 1).

LUKVPress masks: kept = complement of masked_key_indices (kind "lukv"). BlockPress prunes (kind "block", the main
script's block tie rule).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import kvpress.presses.lukv_press as lukv_module
from kvpress import BlockPress, CURPress, ExpectedAttentionPress, KeyDiffPress, KnormPress, LUKVPress

REPO = Path(__file__).resolve().parents[3]
ARTEFACTS = "tests/golden/kvpress/artefacts"
TINY_MODELS = ("llama", "llama3_rope", "qwen2", "mistral")
CURVE_SEEDS = {"llama": 18001, "llama3_rope": 18002, "qwen2": 18003, "mistral": 18004}
BLOCK_SIZE = 32

MASKED_KINDS = {"lukv"}

NOTES = [
    "lukv group: LUKVPress reads synthetic budget curves tests/golden/kvpress/artefacts/lukv_curve_<model>.npy "
    "(float32 [99, 2, 2], numpy seed per model; written by tools/golden/kvpress_groups/lukv.py) through kvpress's "
    "own _load_budget_curves (BUDGET_CURVE_URLS extended with the local files, load_budget_curve = np.load); the "
    "C++ configs name the same files",
    "lukv: masks (kept = complement of masked_key_indices); kept counts checked against the curve arithmetic and "
    "the kept sets against a stable descending argsort of the protected scores; press labels end in @<model> "
    "because each model has its own curve file",
    "lukv boundary_tie: equal fractional parts across the remainder (torch.topk's tie order), or equal protected "
    "scores across a head's count (kvpress's stable sort resolves those by position, deterministically, but any "
    "last-bit difference between two implementations' scores reorders the tied entries: flagged like the other "
    "presses' ties)",
    "block(knorm) f32 ties: the prompts repeat token ids, and in layer 0 two positions of one token have keys that "
    "differ only by RoPE, i.e. equal norms",
    f"block(...) uses block_size {BLOCK_SIZE} (128 >= L would be a single step, identical to the scorer alone)",
]


def curve_path(model_name: str) -> str:
    return f"{ARTEFACTS}/lukv_curve_{model_name}.npy"


def make_curve(model_name: str, layers: int = 2, kv_heads: int = 2) -> np.ndarray:
    rng = np.random.default_rng(CURVE_SEEDS[model_name])
    z = rng.standard_normal((layers, kv_heads))
    z -= z.mean()
    curve = np.empty((99, layers, kv_heads), dtype=np.float64)
    for t in range(99):
        cr = (t + 1) / 100
        curve[t] = np.clip(cr + 0.35 * min(cr, 1 - cr) * z, 0.0, 0.995)
    curve[24, 0, 1] = -0.1
    curve[89, 1, 0] = 1.0
    return curve.astype("<f4")


def write_curves():
    (REPO / ARTEFACTS).mkdir(parents=True, exist_ok=True)
    for name in TINY_MODELS:
        np.save(REPO / curve_path(name), make_curve(name), allow_pickle=False)


write_curves()


def _install_local_curves():
    tiny = REPO / "tests" / "golden" / "tiny_models"
    for name in TINY_MODELS:
        for dtype in ("f32", "bf16"):
            for scorer in ("ExpectedAttentionPress", "KnormPress"):
                lukv_module.BUDGET_CURVE_URLS[(str(tiny / name / dtype), scorer)] = str(REPO / curve_path(name))
    lukv_module.load_budget_curve = lambda url: np.load(url, allow_pickle=False)


_install_local_curves()


# ------------------------------------------------------------------------------------------------------------------
# Method configs (catalog ids/params) and presses.

def simple(method_id, variant=None, **params):
    return {"id": method_id, "variant": variant, "params": params, "scorer": None}


EA_002 = simple("expected_attention", n_future_positions=512, n_sink=4, use_covariance=True, use_vnorm=True,
                epsilon=0.02)
KNORM = simple("knorm")
KEYDIFF = simple("keydiff", "oneshot", block_size=128)
CUR = simple("cur", num_sinks=4, leverage_type="kv_product", use_local_approximation=True, local_window_size=16)


def lukv_method(scorer, model_name, sink, window):
    return {"id": "lukv", "variant": None, "params": {"curve": curve_path(model_name), "sink": sink, "window": window},
            "scorer": scorer}


def press_table():
    """(label, registry, factory(cr), method, attn, kind). The lukv rows depend on the model (the curve file), so
    they are built per model by runs_on + the factories below (one row per model, filtered by runs_on)."""
    table = []
    for model_name in TINY_MODELS:
        for label, scorer, make, sink, window in (
                ("expected_attention,epsilon=0.02", EA_002, lambda: ExpectedAttentionPress(epsilon=2e-2), 4, 1),
                ("knorm,sink=2,window=8", KNORM, lambda: KnormPress(), 2, 8)):
            table.append((f"lukv({label})@{model_name}", "lukv" if scorer is EA_002 else None,
                          lambda cr, make=make, sink=sink, window=window: LUKVPress(
                              press=make(), compression_ratio=cr, sink=sink, window=window),
                          lukv_method(scorer, model_name, sink, window), "sdpa", "lukv"))
    for label, scorer, make in (("knorm", KNORM, lambda cr: KnormPress(compression_ratio=cr)),
                                ("cur", CUR, lambda cr: CURPress(compression_ratio=cr)),
                                ("keydiff", KEYDIFF, lambda cr: KeyDiffPress(compression_ratio=cr))):
        table.append((f"block({label},block_size={BLOCK_SIZE})", None,
                      lambda cr, make=make: BlockPress(press=make(cr), block_size=BLOCK_SIZE),
                      {"id": "block", "variant": None, "params": {"block_size": BLOCK_SIZE}, "scorer": scorer},
                      "sdpa", "block"))
    return table


def runs_on(label, model_name, dtype_name):
    if "@" in label:
        return label.endswith("@" + model_name)
    return True


# ------------------------------------------------------------------------------------------------------------------
# LU-KV checks (the press's own arithmetic restated, for the checks only).

def _lukv_counts(press, layer: int, length: int):
    target = max(0, min(98, int(round(press.compression_ratio * 100)) - 1))
    ratios = torch.as_tensor(press._budget_curves[target, layer], dtype=torch.float32)
    ideal = (1.0 - ratios).clamp(min=0.0, max=1.0) * length
    heads = ratios.shape[0]
    total = max(heads, min(heads * length, int(torch.round(ideal.sum()).item())))
    base = torch.floor(ideal).long()
    remainder = total - int(base.sum().item())
    fractions = ideal - base
    tie = False
    if remainder > 0:
        k = min(remainder, heads)
        ordered = fractions.sort(descending=True).values
        tie = 0 < k < heads and bool(ordered[k - 1] == ordered[k])
        base[torch.topk(fractions, k=k).indices] += 1
    return base.clamp(min=1, max=length).tolist(), tie


def check_budget(label, kind, press, kept, length, cr, where):
    if kind != "lukv":
        return False
    for layer, per_head in enumerate(kept):
        counts, _ = _lukv_counts(press, layer, length)
        assert [len(h) for h in per_head] == counts, f"{where}: layer {layer} keeps {[len(h) for h in per_head]}, " \
                                                     f"curve arithmetic {counts}"
    return True


def boundary_tie(kind, press, log, kept, cr):
    if kind != "lukv":
        return None
    tie = False
    for layer, per_head in enumerate(kept):
        (entry,) = [e for e in log if e["layer"] == layer and e["role"] == "inner"]
        scores = entry["ref"][0]  # protected in place by LUKVPress after score() returned
        counts = [len(h) for h in per_head]
        _, fraction_tie = _lukv_counts(press, layer, entry["length"])
        tie |= fraction_tie
        for h, k in enumerate(counts):
            ordered = scores[h].sort(descending=True).values
            tie |= 0 < k < ordered.numel() and bool(ordered[k - 1] == ordered[k])
    return tie


def check_against_scores(kind, log, kept, tie, where):
    """lukv: the kept set is the first keep[h] entries of kvpress's stable descending sort of the protected scores
    (checked also with ties: the stable sort is deterministic)."""
    if kind != "lukv":
        return False
    for layer, per_head in enumerate(kept):
        (entry,) = [e for e in log if e["layer"] == layer and e["role"] == "inner"]
        scores = entry["ref"][0]
        for h, ids in enumerate(per_head):
            order = torch.argsort(scores[h], descending=True, stable=True)
            assert sorted(order[:len(ids)].tolist()) == ids, f"{where}: layer {layer} head {h} is not the stable top"
    return True
