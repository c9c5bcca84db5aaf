"""Press group wrappers: PerLayerCompressionPress, ComposedPress, KeyRerotationPress, ChunkPress,
EntropyGatedChunkKVPress, CriticalAdaKVPress (kvpress 0.5.5) -> tests/golden/kvpress/kept_wrappers.json.

Run from the repository root: nice tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group wrappers
(see that script's docstring for the document shape and the group hooks). C++ side: methods/per_layer_compression.h,
composed.h, key_rerotation.h, chunk.h, entropy_gated_chunkkv.h, critical_adakv.h; parity test
tests/methods/kvpress_parity_test.cpp (kept sets; KvpressParityRerotation: the CPU cache's re-rotated keys); the
re-rotation formula on kvpress's own inputs: tests/methods/wrappers_test.cpp.

Cases (every model/dtype/protocol of the main script; compression 0.25, 0.5, 0.75, 0.9; sdpa):
  per_layer_compression(snapkv(window=16)), per_layer_compression(streaming_llm): two layers with ratios
    cr - d, cr + d (d = min(0.125, (1 - cr) / 2)), whose mean is the case's compression (PerLayerCompressionPress has
    no settable ratio; the catalog fixes the cell budget to the mean).
  composed(streaming_llm, snapkv(window=16)), composed(knorm, streaming_llm), composed(snapkv(window=16), keydiff):
    two presses with the same ratio c = 1 - sqrt(1 - cr), so that 1 - (1 - c)^2 = cr (ComposedPress's reported
    ratio). The second press scores the cache the first left, in its topk order (which SnapKV's window mask and
    pooling, and StreamingLLM's sinks and recent tokens, see by index: after knorm, streaming_llm keeps knorm's 4 best
    and its lowest-ranked survivors).
  key_rerotation(streaming_llm), key_rerotation(snapkv(window=16)): kept sets from the re-rotation's indices (the
    re-rotated rows match no full key row). The query-agnostic key_rerotation(streaming_llm) cases at cr 0.75 also
    carry "rerotation": {"inv_freq" [layer][d/2] (module.rotary_emb.inv_freq), "positions" [layer][head][n] (the
    sorted kept positions), "kept_keys" and "rerotated_keys" [layer][head][n][d] (rerotate_keys's input rows and
    output)}.
  chunk(knorm, chunk_length=32), chunk(keydiff, chunk_length=48) (a partial last chunk at L = 128),
    chunk(streaming_llm, chunk_length=32), chunk(snapkv(window=16)) with the default chunk_length 1024 >= L (one
    chunk: the press is its scorer).
  entropy_gated_chunkkv with snapkv(window=16), tova and keydiff (the defaults: chunk_length 10,
    low_entropy_chunk_length 4) and with knorm (20, 5). With SnapKV the window tokens (all max + 1) fill the last
    chunks; a chunk of them that the gate finds spiky keeps 4 of its equal scores, a tie, so most snapkv cases are
    flagged; tova/keydiff/knorm have no such tied groups.
  critical_adakv(snapkv(window=16)), critical_adakv(knorm), critical_adakv(expected_attention, use_vnorm=False)
    (masking press: kept sets from masked_key_indices).
  critical_adakv(snapkv(window=16)) runs on the f32 models only (runs_on; NOTES).
Boundary ties: per_layer, composed, chunk, key_rerotation: an exact equality across a per-head top-k cut (per layer,
per press, per chunk) of the scores the inner presses returned (the main script's head_ties). entropy_gated_chunkkv
and critical_adakv have several dependent stages (chunk order, partial chunks, top-up; safeguard, head budgets, stage
1, final cut): each is replayed here from the recorded scores twice, breaking every tie once toward the lower and
once toward the higher index, and the case is flagged when the two kept sets differ (a tie that changes nothing,
e.g. among window tokens kept anyway, is not flagged). These replays serve the tie flag only.
"""

from __future__ import annotations

import logging
import math

import torch
from kvpress import (ChunkPress, ComposedPress, CriticalAdaKVPress, EntropyGatedChunkKVPress,
                     ExpectedAttentionPress, KeyDiffPress, KeyRerotationPress, KnormPress,
                     PerLayerCompressionPress, SnapKVPress, StreamingLLMPress, TOVAPress)
from kvpress.presses.criticalkv_press import CriticalKVPress

# PerLayerCompressionPress warns on every construction that it needs flash attention: its forward hook only sets
# the inner press's ratio per layer, which works as well with the CPU sdpa kernel used here.
logging.getLogger("kvpress.presses.per_layer_compression_press").setLevel(logging.ERROR)

SMALL_WINDOW = 16
REROTATION_CR = 0.75
REROTATION_LENGTH = 128  # the query-agnostic prefill of the main script (CONTEXT_LENGTH)
MASKED_KINDS = {"critical_adakv"}
KINDS = {"per_layer", "composed", "rerotation", "chunk", "eg_chunk", "critical_adakv"}

NOTES = [
    "wrappers group: per_layer_compression cases use ratios [cr - d, cr + d] (d = min(0.125, (1 - cr) / 2)) and "
    "composed cases two presses of ratio 1 - sqrt(1 - cr); 'compression' is the ratio kvpress reports for them",
    "key_rerotation kept sets come from the indices passed to KeyRerotationPress.rerotate_keys (its re-rotated rows "
    "match no full key row); the query-agnostic key_rerotation(streaming_llm) cases at cr 0.75 carry kvpress's "
    "rerotate_keys inputs and output (rows in ascending original position, as kvpress sorts the indices) for "
    "tests/methods/wrappers_test.cpp (the formula) and kvpress_parity_test.cpp (the CPU cache after eviction)",
    "critical_adakv masks (AdaKV-style) and refuses eager attention; kept = complement of masked_key_indices",
    "critical_adakv(snapkv(window=16)) runs on the f32 models only: on the bf16 model every case had a tie across a "
    "cut in kvpress's own bf16 (s + eps) * ||W_o v||_1, so no bf16 case could be judged; critical_adakv(knorm) "
    "(fp32 scores) and critical_adakv(expected_attention) cover bf16",
    "composed: a second press that reads cache indices (SnapKV's window mask and pooling, StreamingLLM's sinks) sees "
    "the first press's kept rows in its score order, so it depends on the ORDER of every first-stage score, not only "
    "on the cut; composed(knorm, snapkv) was dropped because a last-bit difference between our and torch's f32 norms "
    "anywhere reorders the cache (untied min overlap 0.89, mean 0.99); composed(streaming_llm, snapkv) tests the "
    "same reordering with exact 0/1 first-stage scores, whose order is torch's topk order among equal values",
    "chunk(snapkv) uses the default chunk_length 1024 >= L: a single chunk, identical to the scorer (kvpress scores a "
    "non-final chunk's window queries with the sequence's last rotary positions, which kvaudit refuses)",
]


# ------------------------------------------------------------------------------------------------------------------
# Method configs (catalog ids/params) and presses.

def snap(window=SMALL_WINDOW):
    return {"id": "snapkv", "variant": "kvpress",
            "params": {"window": window, "kernel_size": 5, "pooling": "avg"}, "scorer": None}


def simple(method_id, variant=None, **params):
    return {"id": method_id, "variant": variant, "params": params, "scorer": None}


KNORM = simple("knorm")
TOVA = simple("tova", "kvpress")
KEYDIFF = simple("keydiff", "oneshot", block_size=128)
STREAMING = simple("streaming_llm", n_sink=4)
EA_NO_VNORM = {"id": "expected_attention", "variant": None,
               "params": {"n_future_positions": 512, "n_sink": 4, "use_covariance": True, "use_vnorm": False,
                          "epsilon": 0.0}, "scorer": None}


def wrapper(method_id, scorer, **params):
    return {"id": method_id, "variant": None, "params": params, "scorer": scorer}


def per_layer_ratios(cr):
    d = min(0.125, (1 - cr) / 2)
    return [cr - d, cr + d]


def stage_ratio(cr):
    return 1 - math.sqrt(1 - cr)


def snap_press(cr=0.0):
    return SnapKVPress(compression_ratio=cr, window_size=SMALL_WINDOW)


def press_table():
    """(label, registry, factory(cr), method, attn, kind)."""
    table = []
    for label, scorer, make in (("snapkv(window=16)", snap(), snap_press),
                                ("streaming_llm", STREAMING, lambda cr=0.0: StreamingLLMPress(compression_ratio=cr))):
        table.append((f"per_layer_compression({label})", None,
                      lambda cr, make=make: PerLayerCompressionPress(press=make(),
                                                                     compression_ratios=per_layer_ratios(cr)),
                      None, "sdpa", "per_layer", scorer))
    composed = (("streaming_llm,snapkv(window=16)", (STREAMING, snap()),
                 lambda c: [StreamingLLMPress(compression_ratio=c), snap_press(c)]),
                ("knorm,streaming_llm", (KNORM, STREAMING),
                 lambda c: [KnormPress(compression_ratio=c), StreamingLLMPress(compression_ratio=c)]),
                ("snapkv(window=16),keydiff", (snap(), KEYDIFF),
                 lambda c: [snap_press(c), KeyDiffPress(compression_ratio=c)]))
    for label, stages, make in composed:
        table.append((f"composed({label})", None, lambda cr, make=make: ComposedPress(make(stage_ratio(cr))),
                      None, "sdpa", "composed", stages))
    for label, scorer, make in (("streaming_llm", STREAMING, lambda cr: StreamingLLMPress(compression_ratio=cr)),
                                ("snapkv(window=16)", snap(), snap_press)):
        table.append((f"key_rerotation({label})", None, lambda cr, make=make: KeyRerotationPress(press=make(cr)),
                      wrapper("key_rerotation", scorer), "sdpa", "rerotation", None))
    for label, scorer, make, chunk in (("knorm", KNORM, lambda cr: KnormPress(compression_ratio=cr), 32),
                                       ("keydiff", KEYDIFF, lambda cr: KeyDiffPress(compression_ratio=cr), 48),
                                       ("streaming_llm", STREAMING, lambda cr: StreamingLLMPress(compression_ratio=cr),
                                        32),
                                       ("snapkv(window=16)", snap(), snap_press, 1024)):
        name = f"chunk({label},chunk_length={chunk})" if chunk != 1024 else f"chunk({label})"
        table.append((name, None, lambda cr, make=make, chunk=chunk: ChunkPress(press=make(cr), chunk_length=chunk),
                      wrapper("chunk", scorer, chunk_length=chunk), "sdpa", "chunk", None))
    for label, scorer, make, chunk, low in (("snapkv(window=16)", snap(), snap_press, 10, 4),
                                            ("tova", TOVA, lambda cr: TOVAPress(compression_ratio=cr), 10, 4),
                                            ("keydiff", KEYDIFF, lambda cr: KeyDiffPress(compression_ratio=cr), 10, 4),
                                            ("knorm", KNORM, lambda cr: KnormPress(compression_ratio=cr), 20, 5)):
        name = f"entropy_gated_chunkkv({label})" if (chunk, low) == (10, 4) else \
            f"entropy_gated_chunkkv({label},chunk_length={chunk},low_entropy_chunk_length={low})"
        table.append((name, None,
                      lambda cr, make=make, chunk=chunk, low=low: EntropyGatedChunkKVPress(
                          press=make(cr), chunk_length=chunk, low_entropy_chunk_length=low),
                      wrapper("entropy_gated_chunkkv", scorer, chunk_length=chunk, low_entropy_chunk_length=low),
                      "sdpa", "eg_chunk", None))
    for label, scorer, make in (("snapkv(window=16)", snap(), snap_press),
                                ("knorm", KNORM, lambda cr: KnormPress(compression_ratio=cr)),
                                ("expected_attention,use_vnorm=false", EA_NO_VNORM,
                                 lambda cr: ExpectedAttentionPress(compression_ratio=cr, use_vnorm=False))):
        table.append((f"critical_adakv({label})", None, lambda cr, make=make: CriticalAdaKVPress(press=make(cr)),
                      wrapper("critical_adakv", scorer, alpha=0.2, epsilon=1e-4, first_stage_ratio=0.5), "sdpa",
                      "critical_adakv", None))
    for row in table:
        if row[3] is None:
            LIST_METHODS[row[0]] = row[6]
    return [row[:6] for row in table]


# Presses whose bf16 cases all tie (kvpress's own bf16 scores are equal across a cut in every case of the one bf16
# prompt, so the parity test could judge none of them): f32 only; see NOTES.
F32_ONLY = {"critical_adakv(snapkv(window=16))"}


def runs_on(label, model_name, dtype_name):
    return dtype_name == "f32" or label not in F32_ONLY


# label -> the scorer config(s) of a list wrapper (per_layer: one, composed: one per press); their method config
# depends on the case's ratios and is written by case_extra (later keys of the case dict win).
LIST_METHODS = {}


def list_method(kind, press, extra):
    if kind == "per_layer":
        return wrapper("per_layer_compression", extra, compression_ratios=list(press.compression_ratios))
    return {"id": "composed", "variant": None,
            "params": {"compression_ratios": [p.compression_ratio for p in press.presses]}, "scorer": None,
            "stages": list(extra)}


# ------------------------------------------------------------------------------------------------------------------
# Hooks (make_kvpress_golden.py).

def golden():
    import __main__
    return __main__


def inner_presses(press):
    if isinstance(press, ComposedPress):
        return [(f"stage{i}", p) for i, p in enumerate(press.presses)]
    return [("inner", press.press)]


def install_recorders(press, log):
    if not isinstance(press, (PerLayerCompressionPress, ComposedPress, KeyRerotationPress, ChunkPress,
                              EntropyGatedChunkKVPress, CriticalAdaKVPress)):
        return False
    for role, inner in inner_presses(press):
        inner.score = golden().ScoreRecorder(inner, role, log)
    return True


REROTATED = {}  # id(press) -> [(indices [Hkv, n], re-rotated keys [Hkv, n, d]) per layer]


def run_press(model, attn, ids, press):
    if not isinstance(press, KeyRerotationPress):
        return golden().prefill(model, attn, ids, press)[0]
    calls = []
    original = KeyRerotationPress.rerotate_keys

    def recording(module, indices, keys):
        out = original(module, indices, keys)
        gathered = keys.gather(2, indices.unsqueeze(-1).expand(-1, -1, -1, module.head_dim))
        calls.append((module.layer_idx, indices[0].clone(), gathered[0].clone(), out[0].clone(),
                      module.rotary_emb.inv_freq.clone(), keys.shape[2]))
        return out

    press.rerotate_keys = recording
    cache, _ = golden().prefill(model, attn, ids, press)
    calls.sort(key=lambda c: c[0])
    assert [c[0] for c in calls] == list(range(len(cache))), "rerotate_keys was not called once per layer"
    for layer, call in enumerate(calls):
        assert torch.equal(cache[layer], call[3]), "the cache does not hold the re-rotated keys"
    REROTATED[id(press)] = calls
    return [c[2] for c in calls]  # the kept rows before the re-rotation: they match the full keys


def short_floats(tensor):
    """Nested lists of the f32 values, each the shortest decimal that reads back to the same f32."""
    import numpy as np
    flat = [float(str(np.float32(v))) for v in tensor.float().reshape(-1).tolist()]
    out = torch.tensor(flat, dtype=torch.float64).reshape(tensor.shape)
    assert torch.equal(out.float(), tensor.float())
    return out.tolist()


def case_extra(label, kind, press):
    extra = {}
    if label in LIST_METHODS:
        extra["method"] = list_method(kind, press, LIST_METHODS[label])
    if kind == "rerotation" and abs(press.compression_ratio - REROTATION_CR) < 1e-12 and \
            isinstance(press.press, StreamingLLMPress):
        recorded = REROTATED[id(press)]
        if recorded[0][5] == REROTATION_LENGTH:
            extra["rerotation"] = {
                "inv_freq": [short_floats(c[4]) for c in recorded],
                "positions": [c[1].tolist() for c in recorded],
                "kept_keys": [short_floats(c[2]) for c in recorded],
                "rerotated_keys": [short_floats(c[3]) for c in recorded]}
    return extra


def n_kept(length, cr):
    return max(1, int(length * (1 - cr)))


def chunk_counts(length, chunk, cr):
    if cr == 0:
        return length
    return sum(n_kept(min(chunk, length - i), cr) for i in range(0, length, chunk))


def check_budget(label, kind, press, kept, length, cr, where):
    if kind not in KINDS:
        return False
    for layer, per_head in enumerate(kept):
        counts = [len(h) for h in per_head]
        hkv = len(counts)
        if kind == "per_layer":
            expected = [n_kept(length, press.compression_ratios[layer])] * hkv
        elif kind == "composed":
            n = length
            for p in press.presses:
                if p.compression_ratio:
                    n = n_kept(n, p.compression_ratio)
            expected = [n] * hkv
        elif kind == "rerotation":
            expected = [n_kept(length, cr)] * hkv
        elif kind == "chunk":
            expected = [chunk_counts(length, press.chunk_length, cr)] * hkv
        elif kind == "eg_chunk":
            assert all(h == per_head[0] for h in per_head), f"{where}: entropy-gated heads differ"
            expected = [n_kept(length, cr)] * hkv
        else:  # critical_adakv
            total = n_kept(length, cr)
            n_safe = max(1, int(total * press.alpha_safeguard))
            assert sum(counts) == hkv * total and min(counts) >= n_safe, f"{where}: layer {layer} keeps {counts}"
            continue
        assert counts == expected, f"{where}: layer {layer} keeps {counts}, expected {expected}"
    return True


def check_against_scores(kind, log, kept, tie, where):
    if kind not in KINDS:
        return False
    if tie or kind not in ("per_layer", "rerotation"):
        return True
    for layer, per_head in enumerate(kept):
        (entry,) = [e for e in log if e["layer"] == layer]
        scores = entry["raw"][0]
        expected = [sorted(scores[h].topk(len(ids)).indices.tolist()) for h, ids in enumerate(per_head)]
        assert expected == per_head, f"{where}: layer {layer} kept set is not the top-k of the scorer's scores"
    return True


def top_indices(values, k, low_first):
    """The k largest entries of a 1-D tensor, ties broken toward the lower (low_first) or the higher index: two
    replays of a selection that differ only in how ties are broken."""
    if k <= 0:
        return torch.zeros(0, dtype=torch.long)
    n = values.numel()
    order = sorted(range(n), key=lambda i: (-float(values[i]), i if low_first else n - i))
    return torch.tensor(order[:k], dtype=torch.long)


def entropy_gated_replay(press, raw, cr, low_first):
    """EntropyGatedChunkKVPress.compress restated on the recorded scores [Hkv, L] (for the tie flag only)."""
    scores = raw.sum(dim=0).float()
    length, chunk = scores.numel(), press.chunk_length
    budget = n_kept(length, cr)
    bounds = [(i, min(i + chunk, length)) for i in range(0, length, chunk)]
    means = torch.stack([scores[a:b].mean() for a, b in bounds])
    entropies = []
    for a, b in bounds:
        part = scores[a:b]
        if b - a == 1:
            entropies.append(torch.tensor(0.0))
            continue
        part = part - part.min().clamp(max=0.0)
        p = part / (part.sum() + 1e-8)
        entropies.append((-(p * (p + 1e-8).log()).sum() / math.log(b - a)).clamp(0.0, 1.0))
    entropies = torch.stack(entropies)
    high, low = means >= means.median(), entropies < entropies.median()
    keep = torch.zeros(length, dtype=torch.bool)
    for c in top_indices(means, len(bounds), low_first).tolist():
        if budget <= 0:
            break
        a, b = bounds[c]
        n = min(b - a, budget)
        if high[c] and low[c]:
            n = min(n, press.low_entropy_chunk_length)
        keep[top_indices(scores[a:b], n, low_first) + a] = True
        budget -= n
    if budget > 0:
        leftover = (~keep).nonzero().squeeze(-1)
        keep[leftover[top_indices(scores[leftover], min(budget, leftover.numel()), low_first)]] = True
    return keep


def critical_adakv_replay(press, entry, cr, low_first):
    """CriticalAdaKVPress's stages restated on the recorded inner scores [Hkv, L] (for the tie flag only): the
    kept mask [Hkv, L]."""
    raw = entry["raw"][0]
    hkv, length = raw.shape
    top = torch.finfo(raw.dtype).max
    total = n_kept(length, cr)
    n_safe = max(1, int(total * press.alpha_safeguard))
    scores = raw.clone()
    for h in range(hkv):
        scores[h, top_indices(scores[h], n_safe, low_first)] = top
    flat = top_indices(scores.reshape(-1), total * hkv, low_first)
    budgets = torch.bincount(flat // length, minlength=hkv).tolist()
    for h in range(hkv):
        scores[h, top_indices(scores[h], int(budgets[h] * press.first_stage_ratio), low_first)] = top
    final = (scores + press.epsilon) * CriticalKVPress.vwl1norm(entry["values"], entry["module"])[0]
    keep = torch.zeros(hkv, length, dtype=torch.bool)
    for h in range(hkv):
        keep[h, top_indices(final[h], budgets[h], low_first)] = True
    return keep


def boundary_tie(kind, press, log, kept, cr):
    if kind not in KINDS:
        return None
    head_ties = golden().head_ties
    tie = False
    for layer, per_head in enumerate(kept):
        entries = [e for e in log if e["layer"] == layer]
        hkv = len(per_head)
        if kind in ("per_layer", "rerotation"):
            (entry,) = entries
            tie |= head_ties(entry["raw"][0], [len(h) for h in per_head])
        elif kind == "composed":
            for entry in entries:
                stage = press.presses[int(entry["role"][len("stage"):])]
                tie |= head_ties(entry["raw"][0], [n_kept(entry["length"], stage.compression_ratio)] * hkv)
        elif kind == "chunk":
            for entry in entries:
                tie |= head_ties(entry["raw"][0], [n_kept(entry["length"], cr)] * hkv)
        elif kind == "eg_chunk":
            (entry,) = entries
            # a tie matters when breaking it the other way changes the kept set
            tie |= not torch.equal(entropy_gated_replay(press, entry["raw"][0], cr, True),
                                   entropy_gated_replay(press, entry["raw"][0], cr, False))
        else:
            (entry,) = entries
            tie |= not torch.equal(critical_adakv_replay(press, entry, cr, True),
                                   critical_adakv_replay(press, entry, cr, False))
    return tie
