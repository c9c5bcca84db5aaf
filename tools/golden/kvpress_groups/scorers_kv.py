"""Press group scorers_kv: LagKVPress, CURPress, SimLayerKVPress (kvpress 0.5.5) -> kept_scorers_kv.json.

Run from the repository root: tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group scorers_kv
(see that script's docstring for the document shape and the group hooks). C++ side: methods/lagkv.h, methods/cur.h,
methods/simlayerkv.h; parity test tests/methods/kvpress_parity_test.cpp.

Cases (L = 128 query-agnostic, 144 query-aware; every model/dtype/protocol of the main script):
  lagkv: the defaults (n_sink 4, lag_size 128) never score here, since L < n_sink + 2 * lag_size: kvpress's
    short-prompt ramp (sinks, then the most recent tokens) is what they test. lag_size 32 (2 or 3 scored partitions)
    and lag_size 16 (6 or 7) exercise the lag-relative scores, each with cross_scoring False (ranks within each
    partition) and lag_size 16 also with cross_scoring True (raw scores across partitions).
  cur: the defaults (kv_product, local windows of 16), key / value / kv_avg with local windows, kv_product without
    the local approximation, kv_product with local windows of 5 (a partial last window).
  simlayerkv: no compression ratio; its budget is the lazy threshold (the catalog's threshold axis). Two settings
    with a small n_recent (n_last 1, n_recent 32, n_initial 4; n_last 4, n_recent 24, n_initial 4), each at four
    thresholds: three chosen from the lazy scores of these prompts so that some layers are lazy and some are not
    (tests/methods/scorers_kv_test.cpp checks it on the written golden), and 1.0 (kvpress's default: the press does
    nothing).
Boundary ties (the main script's "scorer" rule for lagkv/cur): lagkv's rank scores repeat once per scored partition
and its sinks and tail all score 1, so most lagkv cases are flagged; untied ones remain where the budget falls
between rank levels (e.g. lag_size 32, cr 0.25/0.5). simlayerkv: flagged when a lazy score equals the threshold.
Parity (kvpress_parity_test, kept_scorers_kv): lagkv and simlayerkv match exactly in every f32 case; the shortfalls
below 1.0 in untied cases are near-ties, not exact ones: (1) cur f32, mostly layer 0: the prompts are random ids, so
repeated tokens have keys that differ only by RoPE rounding and values that are equal, and their leverage scores
differ by about 1e-7 relative; last-bit differences (our double-accumulated norms vs torch's float reduction, our
CpuModel's keys vs transformers') order such neighbours differently; (2) bf16 cur/lagkv: scores held in bf16 (8 bits)
have many near-equal neighbours. A Python mirror of methods/cur.cpp's rounding points reproduced kvpress's bf16 cur
scores bit for bit from kvpress's own keys/values (llama bf16, both protocols, key/16 and kv_product/5), so the bf16
differences come from the inputs: our CpuModel's bf16 keys/values vs transformers'.
"""

from __future__ import annotations

from kvpress import CURPress, LagKVPress, SimLayerKVPress
from kvpress.presses.snapkv_press import SnapKVPress

# (n_last, n_recent, n_initial) -> thresholds; kvpress's lazy scores of the golden prompts lie in [0.190, 0.361] for
# the first setting and [0.148, 0.276] for the second, each at least 0.0035 away from every threshold below.
SIMLAYERKV_SETTINGS = {
    (1, 32, 4): (0.215, 0.258, 0.305, 1.0),
    (4, 24, 4): (0.163, 0.197, 0.24, 1.0),
}

NOTES = [
    "scorers_kv group: lagkv with the defaults (lag_size 128) takes kvpress's short-prompt path (L < n_sink + "
    "2*lag_size: sinks score 1, then i/(L-n_sink)); lag_size 32 and 16 exercise the lag-relative scores",
    "lagkv with cross_scoring false scores ranks/lag_size within each partition, so every rank value repeats once "
    "per scored partition and the sinks and the tail all score 1: boundary_tie is set unless the budget falls "
    "exactly between rank levels",
    "cur's use_random_leverage (a Gaussian projection from torch's global RNG) is not included",
    "cur and lagkv scores have exact ties (flagged by boundary_tie) and near-ties that are not flagged: 1e-7 "
    "relative in f32 (repeated random tokens in layer 0), one bf16 step in bf16",
    "simlayerkv has no compression ratio: its cases carry 'threshold' (kvpress's lazy_threshold, the catalog's "
    "budget axis) and compression 0; threshold 1.0 is kvpress's default, with which the press does nothing",
]


def lag(n_sink=4, lag_size=128, cross_scoring=False):
    return {"id": "lagkv", "variant": None,
            "params": {"n_sink": n_sink, "lag_size": lag_size, "cross_scoring": cross_scoring}, "scorer": None}


def cur(leverage_type="kv_product", use_local_approximation=True, local_window_size=16, num_sinks=4):
    return {"id": "cur", "variant": None,
            "params": {"num_sinks": num_sinks, "leverage_type": leverage_type,
                       "use_local_approximation": use_local_approximation, "local_window_size": local_window_size},
            "scorer": None}


def simlayer(n_last, n_recent, n_initial):
    return {"id": "simlayerkv", "variant": None,
            "params": {"n_last": n_last, "n_recent": n_recent, "n_initial": n_initial}, "scorer": None}


def press_table():
    table = []
    for lag_size, cross in ((128, False), (32, False), (16, False), (16, True)):
        label = "lagkv" if lag_size == 128 else f"lagkv(lag_size={lag_size}" + (",cross_scoring=true)" if cross
                                                                                 else ")")
        table.append((label, None,
                      lambda cr, lag_size=lag_size, cross=cross: LagKVPress(compression_ratio=cr, lag_size=lag_size,
                                                                            cross_scoring=cross),
                      lag(lag_size=lag_size, cross_scoring=cross), "sdpa", "scorer"))
    for leverage, local, window in (("kv_product", True, 16), ("key", True, 16), ("value", True, 16),
                                    ("kv_avg", True, 16), ("kv_product", False, 16), ("kv_product", True, 5)):
        label = "cur" if (leverage, local, window) == ("kv_product", True, 16) else \
            f"cur(leverage_type={leverage}" + (",use_local_approximation=false" if not local else "") + \
            (f",local_window_size={window}" if window != 16 else "") + ")"
        table.append((label, None,
                      lambda cr, leverage=leverage, local=local, window=window: CURPress(
                          compression_ratio=cr, leverage_type=leverage, use_local_approximation=local,
                          local_window_size=window),
                      cur(leverage, local, window), "sdpa", "scorer"))
    for (n_last, n_recent, n_initial) in SIMLAYERKV_SETTINGS:
        label = f"simlayerkv(n_last={n_last},n_recent={n_recent},n_initial={n_initial})"
        table.append((label, None,
                      lambda threshold, n_last=n_last, n_recent=n_recent, n_initial=n_initial: SimLayerKVPress(
                          lazy_threshold=threshold, n_last=n_last, n_recent=n_recent, n_initial=n_initial),
                      simlayer(n_last, n_recent, n_initial), "sdpa", "simlayerkv"))
    return table


def budget_axis(label):
    for (n_last, n_recent, n_initial), thresholds in SIMLAYERKV_SETTINGS.items():
        if label == f"simlayerkv(n_last={n_last},n_recent={n_recent},n_initial={n_initial})":
            return "threshold", thresholds
    return None


def install_recorders(press, log):
    """SimLayerKVPress: record each layer's lazy score, computed with kvpress's own window attention (the same call
    is_lazy makes), and its decision."""
    if not isinstance(press, SimLayerKVPress):
        return False
    original = type(press).is_lazy

    def is_lazy(module, hidden_states, keys, position_embeddings):
        lazy = original(press, module, hidden_states, keys, position_embeddings)
        attn = SnapKVPress.compute_window_attention(module, hidden_states, keys, press.n_last, position_embeddings)
        mean = attn.mean((0, 1, 2))
        score = (mean[: press.n_initial].sum() + mean[-press.n_recent:].sum()).item()
        assert (score > press.lazy_threshold) == lazy, "recomputed lazy score disagrees with is_lazy"
        log.append({"role": "simlayerkv", "layer": module.layer_idx, "score": score, "lazy": lazy,
                    "length": keys.shape[2]})
        return lazy

    press.is_lazy = is_lazy
    return True


def check_budget(label, kind, press, kept, length, cr, where):
    if kind != "simlayerkv":
        return False
    compressing = press.lazy_threshold < 1.0 and length > press.n_initial + press.n_recent + press.n_last
    for layer, per_head in enumerate(kept):
        counts = {len(h) for h in per_head}
        allowed = {length, press.n_initial + press.n_recent - press.n_last} if compressing else {length}
        assert len(counts) == 1 and counts <= allowed, f"{where}: layer {layer} keeps {sorted(counts)}"
    return True


def boundary_tie(kind, press, log, kept, cr):
    if kind != "simlayerkv":
        return None
    return any(e["score"] == press.lazy_threshold for e in log)


def check_against_scores(kind, log, kept, tie, where):
    if kind != "simlayerkv":
        return False
    if not log:  # threshold 1.0 or a short prompt: nothing evicted
        assert all(len(h) == len(per_head[0]) for per_head in kept for h in per_head), where
        return True
    length = log[0]["length"]
    # Lazy layers are exactly the shortened ones (check_budget checked their counts).
    for entry in log:
        per_head = kept[entry["layer"]]
        assert all(h == per_head[0] for h in per_head), f"{where}: heads differ"
        assert (len(per_head[0]) < length) == entry["lazy"], f"{where}: layer {entry['layer']} decision"
    return True
