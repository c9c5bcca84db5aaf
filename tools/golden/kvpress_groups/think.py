"""Press group think: ThinKPress alone and ComposedPress([SnapKVPress, ThinKPress]) (kvpress 0.5.5)
-> tests/golden/kvpress/kept_think.json.

Run from the repository root: nice tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group think
(see that script's docstring for the document shape and the group hooks). C++ side: methods/think.h, composed.h;
parity test tests/methods/kvpress_parity_test.cpp (kept sets and the case field "zeroed_key_channels").

Cases (every model/dtype/protocol of the main script; sdpa):
  think: ThinKPress(key_channel_compression_ratio=k) for k in 0.25, 0.5, 0.75 (window_size 32, the default). The
    press keeps every position; the case's "compression" is the ratio ThinKPress reports, k / 2, and the case
    carries "key_channel_compression_ratio": k.
  composed(snapkv(window=16),think): ComposedPress([SnapKVPress(s, window_size=16), ThinKPress(0.5)]) for s in 0.25,
    0.5, 0.75; "compression" is ComposedPress's reported 1 - (1 - s)(1 - 0.25), "snapkv_compression" is s.
Every case carries "zeroed_key_channels" [layer][kv head] = the channels ThinKPress zeroed, ascending.
End to end (query-agnostic, think k = 0.5 and composed s = 0.5, every model/dtype): the case also carries "decode":
  {"question_logits": the logits (f32) of the question's last token fed on top of the compressed context (as
   kvpress's pipeline answers), "greedy": DECODE_STEPS greedy token ids from there, "margins": the top-1 minus top-2
   logit at each greedy choice (the first from question_logits)}; the parity test KvpressParityThink replays it
  through our CPU cache (retain + zero_key_channels, then prefill of the question and decode steps).

How they are read (no reimplementation of the press): ThinKPress.compress is wrapped per press instance; the
wrapper clones the keys it receives (the cache as the previous press left it), calls kvpress's compress, and
records the channels the returned keys hold as all-zero (asserting that exactly int(head_dim * k) channels of each
head went to zero and every other element is unchanged). Kept sets are matched on the received keys (ThinK's output
rows, with zeroed channels, match no full key row), after checking that the final cache equals them with the
recorded channels zeroed. Boundary ties: the channel scores are restated from kvpress's own window queries
(ThinKPress.compute_window_queries) with the same torch ops, for the tie flag and the top-k cross-check only; a case
is flagged when the scores at the cut (sorted ascending, positions n-1 and n) are equal in any layer/head, or (composed)
when SnapKV's scores tie across its cut.
"""

from __future__ import annotations

import torch
from kvpress import ComposedPress, SnapKVPress, ThinKPress
from transformers import DynamicCache

DTYPE_OF = {torch.float32: "f32", torch.bfloat16: "bf16"}

KINDS = {"think", "composed_think"}
CHANNEL_RATIOS = (0.25, 0.5, 0.75)
SNAP_RATIOS = (0.25, 0.5, 0.75)
COMPOSED_CHANNEL_RATIO = 0.5
SMALL_WINDOW = 16
THINK_WINDOW = 32
DECODE_STEPS = 8
DECODED = {}  # id(press) -> the "decode" record (run_press)

NOTES = [
    "think group: 'zeroed_key_channels'[l][h] lists the key channels ThinKPress set to zero in layer l, KV head h "
    "(ascending); think cases keep every position and their 'compression' is ThinKPress's reported "
    "key_channel_compression_ratio / 2; composed(snapkv(window=16),think) cases run SnapKVPress(s) then "
    "ThinKPress(0.5) on what it kept, 'compression' = 1 - (1 - s)(1 - 0.25) as ComposedPress reports it",
    "think: kept sets are matched on the keys ThinKPress received (its zeroed rows match no full key row); the final "
    "cache was checked to equal them with the recorded channels zeroed",
    "think boundary_tie: equal channel scores across the pruning cut (scores restated from kvpress's own window "
    "queries with kvpress's torch ops, for the flag only), or (composed) SnapKV scores tied across its cut",
    "think decode: query-agnostic cases with key_channel_compression_ratio 0.5 (think) or SnapKV ratio 0.5 "
    "(composed) carry 'decode': the question's last-token logits on the compressed cache and 8 greedy tokens "
    "with their top-1 margins, positions continuing at the context length as KVPressTextGenerationPipeline passes "
    "them",
]


def snap(window=SMALL_WINDOW):
    return {"id": "snapkv", "variant": "kvpress",
            "params": {"window": window, "kernel_size": 5, "pooling": "avg"}, "scorer": None}


def think_method(k):
    return {"id": "think", "variant": None,
            "params": {"key_channel_compression_ratio": k, "window_size": THINK_WINDOW}, "scorer": None}


COMPOSED_LABEL = "composed(snapkv(window=16),think)"


def press_table():
    """(label, registry, factory(budget), method, attn, kind); methods depend on the budget: case_extra."""
    return [
        ("think", "think", lambda k: ThinKPress(key_channel_compression_ratio=k, window_size=THINK_WINDOW),
         think_method(0.0), "sdpa", "think"),
        (COMPOSED_LABEL, None,
         lambda s: ComposedPress([SnapKVPress(compression_ratio=s, window_size=SMALL_WINDOW),
                                  ThinKPress(key_channel_compression_ratio=COMPOSED_CHANNEL_RATIO,
                                             window_size=THINK_WINDOW)]),
         None, "sdpa", "composed_think"),
    ]


def budget_axis(label):
    if label == "think":
        return ("key_channel_compression_ratio", CHANNEL_RATIOS)
    if label == COMPOSED_LABEL:
        return ("snapkv_compression", SNAP_RATIOS)
    return None


# ------------------------------------------------------------------------------------------------------------------

def golden():
    import __main__
    return __main__


def think_of(press):
    return press.presses[-1] if isinstance(press, ComposedPress) else press


def channel_scores(press, module, keys, kwargs):
    """ThinKPress's per-channel scores [Hkv, d] restated with its torch ops (tie flag and cross-check only)."""
    bsz, hkv, _, head_dim = keys.shape
    groups = module.config.num_attention_heads // hkv
    queries = press.compute_window_queries(module, kwargs["hidden_states"], kwargs["position_embeddings"])
    queries_norm = torch.pow(queries, 2).mean(dim=2)
    queries_norm = queries_norm.view(bsz, hkv, groups, module.head_dim).mean(2)
    keys_norm = torch.pow(keys, 2).mean(dim=2)
    return (queries_norm * keys_norm)[0]


LOGS = {}      # id(press) -> the run's log (install_recorders)
RECORDED = {}  # id(press) -> zeroed channels [layer][head]


def install_recorders(press, log):
    if not isinstance(press, (ThinKPress, ComposedPress)):
        return False
    LOGS[id(press)] = log
    if isinstance(press, ComposedPress):
        press.presses[0].score = golden().ScoreRecorder(press.presses[0], "outer", log)
    target = think_of(press)
    original = type(target).compress

    def recording(module, hidden_states, keys, values, attentions, kwargs):
        received = keys.clone()
        out_keys, out_values = original(target, module, hidden_states, keys, values, attentions, kwargs)
        scores = channel_scores(target, module, received, kwargs)
        n = int(received.shape[-1] * target.key_channel_compression_ratio)
        zeroed = []
        for h in range(received.shape[1]):
            all_zero = (out_keys[0, h] == 0).all(dim=0)
            channels = all_zero.nonzero().squeeze(-1).tolist()
            assert not bool((received[0, h] == 0).all(dim=0).any()), "a key channel was all zero before ThinK"
            assert len(channels) == n, f"layer {module.layer_idx} head {h}: {len(channels)} zeroed channels, not {n}"
            untouched = torch.ones(received.shape[-1], dtype=torch.bool)
            untouched[channels] = False
            assert torch.equal(out_keys[0, h][:, untouched], received[0, h][:, untouched]), "ThinK changed a kept channel"
            zeroed.append(sorted(channels))
        log.append({"role": "think", "layer": module.layer_idx, "received": received[0], "zeroed": zeroed,
                    "scores": scores, "n": n})
        return out_keys, out_values

    target.compress = recording
    return True


def run_press(model, attn, ids, press):
    cache, _ = golden().prefill(model, attn, ids, press)
    log = LOGS[id(press)]
    entries = sorted([e for e in log if e["role"] == "think"], key=lambda e: e["layer"])
    assert [e["layer"] for e in entries] == list(range(len(cache))), "ThinK did not run once per layer"
    for layer, entry in enumerate(entries):
        expected = entry["received"].clone()
        for h, channels in enumerate(entry["zeroed"]):
            expected[h][:, channels] = 0
        assert torch.equal(cache[layer], expected), f"layer {layer}: the cache is not the received keys, zeroed"
    RECORDED[id(press)] = [e["zeroed"] for e in entries]
    DECODED.pop(id(press), None)  # ids of collected presses are reused
    if decodes(press, ids):
        recorded = len(log)
        DECODED[id(press)] = decode_record(model, attn, ids, press)
        del log[recorded:]  # the decode run's recorder entries (the case's are the first run's)
    return [e["received"] for e in entries]


def decodes(press, ids):
    """query-agnostic (the prefill is a prompt's context alone), think k = 0.5 or composed s = 0.5."""
    if len(ids) != golden().CONTEXT_LENGTH:
        return False
    if isinstance(press, ComposedPress):
        return press.presses[0].compression_ratio == 0.5
    return press.key_channel_compression_ratio == 0.5


@torch.no_grad()
def decode_record(model, attn, ids, press):
    """kvpress's pipeline order (KVPressTextGenerationPipeline.generate_answer): compress the context under the
    press, then feed the question and decode greedily on the compressed cache (no press), positions continuing at
    the context's length."""
    (prompt,) = [p for p in golden().make_prompts() if p["context_ids"] == ids and
                 DTYPE_OF[next(model.parameters()).dtype] == p["dtype"]]
    for module in golden().attention_modules(model):
        module.masked_key_indices = None
    cache = DynamicCache()
    with golden().attention_context(attn):
        with press(model):
            model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
        # Positions continue at the original length, as kvpress's pipeline passes them (the compressed cache is
        # shorter, so transformers' default would restart at its length).
        question = prompt["question_ids"]
        position = len(ids)
        logits = model(input_ids=torch.tensor([question]), past_key_values=cache, use_cache=True,
                       position_ids=torch.arange(position, position + len(question)).unsqueeze(0)).logits[0, -1].float()
        position += len(question)
        first = logits.clone()
        greedy, margins = [], []
        for _ in range(DECODE_STEPS):
            top = logits.topk(2).values
            margins.append(float(top[0] - top[1]))
            token = int(logits.argmax())
            greedy.append(token)
            logits = model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True,
                           position_ids=torch.tensor([[position]])).logits[0, -1].float()
            position += 1
    return {"question_logits": short_floats(first), "greedy": greedy, "margins": margins}


def short_floats(tensor):
    import numpy as np
    values = [float(str(np.float32(v))) for v in tensor.reshape(-1).tolist()]
    assert torch.equal(torch.tensor(values, dtype=torch.float32), tensor)
    return values


def case_extra(label, kind, press):
    if kind not in KINDS:
        return {}
    if kind == "think":
        method = think_method(press.key_channel_compression_ratio)
    else:
        snap_press, think_press = press.presses
        method = {"id": "composed", "variant": None,
                  "params": {"compression_ratios": [snap_press.compression_ratio, think_press.compression_ratio]},
                  "scorer": None, "stages": [snap(), think_method(think_press.key_channel_compression_ratio)]}
    extra = {"method": method, "compression": press.compression_ratio, "zeroed_key_channels": RECORDED[id(press)]}
    if id(press) in DECODED:
        extra["decode"] = DECODED.pop(id(press))
    return extra


def n_kept(length, cr):
    return max(1, int(length * (1 - cr)))


def check_budget(label, kind, press, kept, length, cr, where):
    if kind not in KINDS:
        return False
    expected = length if kind == "think" else n_kept(length, press.presses[0].compression_ratio)
    for layer, per_head in enumerate(kept):
        assert [len(h) for h in per_head] == [expected] * len(per_head), f"{where}: layer {layer} counts"
        if kind == "think":
            assert all(h == list(range(length)) for h in per_head), f"{where}: ThinK evicted a position"
    return True


def think_entries(log):
    return sorted([e for e in log if e["role"] == "think"], key=lambda e: e["layer"])


def boundary_tie(kind, press, log, kept, cr):
    if kind not in KINDS:
        return None
    tie = False
    for entry in think_entries(log):
        for h in range(entry["scores"].shape[0]):
            ordered = entry["scores"][h].sort().values  # ascending: the n lowest are pruned
            n = entry["n"]
            tie |= 0 < n < ordered.numel() and bool(ordered[n - 1] == ordered[n])
    if kind == "composed_think":
        for layer, per_head in enumerate(kept):
            (entry,) = [e for e in log if e["role"] == "outer" and e["layer"] == layer]
            tie |= golden().head_ties(entry["raw"][0], [len(h) for h in per_head])
    return tie


def check_against_scores(kind, log, kept, tie, where):
    if kind not in KINDS:
        return False
    if tie:
        return True
    for entry in think_entries(log):
        expected = [sorted(entry["scores"][h].topk(entry["n"], largest=False).indices.tolist())
                    for h in range(entry["scores"].shape[0])]
        assert expected == entry["zeroed"], f"{where}: layer {entry['layer']} zeroed channels are not the restated " \
                                            f"lowest scores"
    if kind == "composed_think":
        for layer, per_head in enumerate(kept):
            (entry,) = [e for e in log if e["role"] == "outer" and e["layer"] == layer]
            scores = entry["raw"][0]
            expected = [sorted(scores[h].topk(len(ids)).indices.tolist()) for h, ids in enumerate(per_head)]
            assert expected == per_head, f"{where}: layer {layer} kept set is not SnapKV's top-k"
    return True
