"""Press group finch: FinchPress (kvpress 0.5.5) -> tests/golden/kvpress/kept_finch.json.

Run from the repository root: nice tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group finch
(see that script's docstring for the document shape and the group hooks). C++ side: methods/finch.h (the method;
its window is SelectionContext::question_tokens, set by the unit runner and by the parity test), the re-rotation
runs/unit/unit_runner.cpp evict_cell -> SequenceCache::rerotate_kept_keys; parity test
tests/methods/kvpress_parity_test.cpp.

The delimiter: FinchPress finds its window through a delimiter token in the prefill's ids (its embed_tokens forward
hook drops that token's embedding and sets window_size = the tokens after it). The tiny models have no tokenizer,
so instead of update_model_and_tokenizer the press gets delimiter_token_id = DELIMITER (id 0, a special id that no
prompt uses: prompts draw from [3, 300) and the vocabulary has 300 ids, so no embedding resize is needed), and
run_press inserts it WINDOW tokens before the end of the prefill ids:
  query-aware: context + sep + question: the window is the 16 question tokens, as kvaudit's question_tokens;
  query-agnostic: context[:-16] + sep + context[-16:]: kvpress has no question-free Finch; this is kvaudit's
    fallback (the last `window` = 16 context positions as the window, method param window = 16).
The dropped delimiter leaves the other tokens' embeddings and positions (0..L-1) exactly those of the prefill
without it, so the full keys the main script computes (no press, no delimiter) are the ones kvpress compresses.

Cases (every model/dtype/protocol of the main script; sdpa):
  finch                              FinchPress() defaults: normalize_scores, rerotate_keys, no chunks
  finch(rerotate_keys=False)         the same selection without the re-rotation
  finch(normalize_scores=False)      plain window mean (no position weighting)
  finch(chunk_length=72)             chunks of 72 (L = 144: two; L = 128: 72 + 56); compression 0.25, 0.5, 0.75 only:
                                     kvpress asserts chunk_length > window / (1 - cr), i.e. > 160 at cr 0.9
Kept sets: with rerotate_keys the re-rotated cache rows match no full key row, so the kept sets are the indices
FinchPress hands to KeyRerotationPress.rerotate_keys (recorded by wrapping that static method for the run; the
cache is checked to hold its output); without it, the cache rows are matched to the full keys (main script).
The query-aware `finch` cases at cr 0.75 (one per prompt) also carry "rerotation": {inv_freq, positions, kept_keys,
rerotated_keys} (rerotate_keys's inputs and output, as in the wrappers group), which kvpress_parity_test.cpp
KvpressParityRerotation compares with the CPU cache after a finch cell's eviction and re-rotation.
Boundary ties: an exact equality across a per-head top-k cut of the scores FinchPress.score returned, per chunk
when chunked (the main script's head_ties; the window's max + 1 entries tie among themselves, which only matters
when the cut falls inside the window). Without a tie the kept sets are checked to be those top-k's.
"""

from __future__ import annotations

import torch
from kvpress import FinchPress
from kvpress.presses.key_rerotation_press import KeyRerotationPress

DELIMITER = 0
WINDOW = 16  # = the main script's QUESTION_LENGTH: the query-aware window; the query-agnostic fallback window
CHUNK = 72
COMPRESSIONS = (0.25, 0.5, 0.75, 0.9)
KINDS = {"finch"}
REROTATION_CR = 0.75
REROTATION_LENGTH = 144  # the query-aware prefill (128 context + 16 question tokens)

NOTES = [
    f"finch group: FinchPress gets delimiter_token_id {DELIMITER} (no tokenizer: a special id no prompt uses, inside "
    f"the 300-id vocabulary) and the delimiter is inserted {WINDOW} tokens before the end of the prefill ids: "
    "query-aware = context + sep + question (window = the question), query-agnostic = context[:-16] + sep + "
    "context[-16:] (kvaudit's query-agnostic fallback window, method param window = 16); FinchPress's embedding hook "
    "drops the delimiter, so keys and positions are those of the prefill without it",
    "finch with rerotate_keys: kept sets are the sorted indices FinchPress passes to KeyRerotationPress.rerotate_keys "
    "(its re-rotated rows match no full key row); the cache was checked to hold that call's output; the query-aware "
    "finch cases at cr 0.75 carry \"rerotation\": {inv_freq [layer][d/2], positions [layer][head][n] (sorted kept "
    "positions), kept_keys and rerotated_keys [layer][head][n][d] (rerotate_keys's input rows and output)} for "
    "tests/methods/kvpress_parity_test.cpp (KvpressParityRerotation: the CPU cache after a finch cell's eviction)",
    f"finch(chunk_length={CHUNK}) runs at compression 0.25, 0.5, 0.75 only: kvpress asserts chunk_length > "
    f"window / (1 - cr), which needs > 160 at cr 0.9",
]


def method(chunk_length=0, normalize_scores=True, rerotate_keys=True):
    return {"id": "finch", "variant": None,
            "params": {"window": WINDOW, "chunk_length": chunk_length, "normalize_scores": normalize_scores,
                       "rerotate_keys": rerotate_keys}, "scorer": None}


def finch(cr, **kwargs):
    press = FinchPress(compression_ratio=cr, **kwargs)
    press.delimiter_token_id = DELIMITER
    return press


def press_table():
    """(label, registry, factory(cr), method, attn, kind)."""
    return [
        ("finch", "finch", lambda cr: finch(cr), method(), "sdpa", "finch"),
        ("finch(rerotate_keys=False)", None, lambda cr: finch(cr, rerotate_keys=False),
         method(rerotate_keys=False), "sdpa", "finch"),
        ("finch(normalize_scores=False)", None, lambda cr: finch(cr, normalize_scores=False),
         method(normalize_scores=False), "sdpa", "finch"),
        (f"finch(chunk_length={CHUNK})", None, lambda cr: finch(cr, chunk_length=CHUNK),
         method(chunk_length=CHUNK), "sdpa", "finch"),
    ]


def budget_axis(label):
    if label == f"finch(chunk_length={CHUNK})":
        return ("compression", tuple(cr for cr in COMPRESSIONS if CHUNK > WINDOW / (1 - cr)))
    return None


# ------------------------------------------------------------------------------------------------------------------
# Hooks (make_kvpress_golden.py).

def golden():
    import __main__
    return __main__


def install_recorders(press, log):
    if not isinstance(press, FinchPress):
        return False
    press.score = golden().ScoreRecorder(press, "outer", log)
    return True


def run_press(model, attn, ids, press):
    if not isinstance(press, FinchPress):
        return golden().prefill(model, attn, ids, press)[0]
    split = len(ids) - WINDOW
    with_delimiter = ids[:split] + [DELIMITER] + ids[split:]
    assert with_delimiter.count(DELIMITER) == 1
    if not press.rerotate_keys:
        keys = golden().prefill(model, attn, with_delimiter, press)[0]
        assert press.window_size == WINDOW
        return keys
    calls = []
    original = KeyRerotationPress.rerotate_keys

    def recording(module, indices, keys):
        out = original(module, indices, keys)
        gathered = keys.gather(2, indices.unsqueeze(-1).expand(-1, -1, -1, module.head_dim))
        calls.append((module.layer_idx, gathered[0].clone(), out[0].clone(), indices[0].clone(),
                      module.rotary_emb.inv_freq.clone(), keys.shape[2]))
        return out

    KeyRerotationPress.rerotate_keys = staticmethod(recording)
    try:
        cache = golden().prefill(model, attn, with_delimiter, press)[0]
    finally:
        KeyRerotationPress.rerotate_keys = staticmethod(original)
    assert press.window_size == WINDOW
    calls.sort(key=lambda c: c[0])
    if press.compression_ratio == 0:
        return cache
    assert [c[0] for c in calls] == list(range(len(cache))), "rerotate_keys was not called once per layer"
    for layer, call in enumerate(calls):
        assert torch.equal(cache[layer], call[2]), "the cache does not hold the re-rotated keys"
    REROTATED[id(press)] = calls
    return [c[1] for c in calls]  # the kept rows before the re-rotation: they match the full keys


REROTATED = {}  # id(press) -> [(layer, kept rows, re-rotated rows, indices, inv_freq, L) per layer]


def case_extra(label, kind, press):
    """The query-aware `finch` cases at cr REROTATION_CR carry kvpress's re-rotation (inputs and output)."""
    if label != "finch" or abs(press.compression_ratio - REROTATION_CR) > 1e-12:
        return {}
    recorded = REROTATED[id(press)]
    if recorded[0][5] != REROTATION_LENGTH:
        return {}
    from kvpress_groups.wrappers import short_floats
    return {"rerotation": {"inv_freq": [short_floats(c[4]) for c in recorded],
                           "positions": [c[3].tolist() for c in recorded],
                           "kept_keys": [short_floats(c[1]) for c in recorded],
                           "rerotated_keys": [short_floats(c[2]) for c in recorded]}}


def n_kept(length, cr):
    return max(1, int(length * (1 - cr)))


def chunks(press, length):
    chunk = press.chunk_length or length
    return [(i, min(i + chunk, length)) for i in range(0, length, chunk)]


def check_budget(label, kind, press, kept, length, cr, where):
    if kind not in KINDS:
        return False
    expected = sum(n_kept(b - a, cr) for a, b in chunks(press, length))
    for layer, per_head in enumerate(kept):
        counts = [len(h) for h in per_head]
        assert counts == [expected] * len(counts), f"{where}: layer {layer} keeps {counts}, expected {expected}"
    return True


def chunk_top_k(scores, press, cr):
    """Per head, the kept positions (ascending) of FinchPress's chunked top-k of scores [Hkv, L]."""
    out = []
    for h in range(scores.shape[0]):
        kept = []
        for a, b in chunks(press, scores.shape[1]):
            kept += (a + scores[h, a:b].topk(n_kept(b - a, cr)).indices).tolist()
        out.append(sorted(kept))
    return out


def check_against_scores(kind, log, kept, tie, where):
    if kind not in KINDS:
        return False
    return True  # checked in boundary_tie, which knows the press and the budget


def boundary_tie(kind, press, log, kept, cr):
    if kind not in KINDS:
        return None
    head_ties = golden().head_ties
    tie = False
    for layer, per_head in enumerate(kept):
        (entry,) = [e for e in log if e["layer"] == layer]
        scores = entry["raw"][0]
        layer_tie = False
        for a, b in chunks(press, entry["length"]):
            layer_tie |= head_ties(scores[:, a:b], [n_kept(b - a, cr)] * len(per_head))
        if not layer_tie:
            assert chunk_top_k(scores, press, cr) == per_head, \
                f"layer {layer}: kept set is not the chunked top-k of FinchPress's scores"
        tie |= layer_tie
    return tie
