"""Press group kvzip: KVzipPress (kvpress 0.5.5; layerwise False/True, KVzip+, chunked reconstruction)
-> tests/golden/kvpress/kept_kvzip.json.

Run from the repository root: tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group kvzip
(see that script's docstring for the document shape and the group hooks). C++ side: methods/kvzip.h (the method),
methods/extra_pass.h and runners/unit/unit_runner.h (the extra forward pass); parity test
tests/methods/kvpress_parity_test.cpp, which runs the pass with the ids recorded here.

KVzipPress builds its reconstruction prompt with the model's tokenizer (AutoTokenizer.from_pretrained on the model's
name_or_path) and chat template. The tiny models have neither, so kvpress's module gets a stand-in tokenizer for the
run (kvzip_press.AutoTokenizer replaced): one id per character, VOCAB_LOW + ord(c) % (VOCAB_HIGH - VOCAB_LOW), and a
chat template "<user>" + content + "</user><bot>". kvpress then derives prefix_length = 6 (the ids of "<user>": the
first 6 prompt positions are treated as the template head: not reconstructed, score 0 unless among the 4 sinks),
the suffix ids of "</user><bot>", and the ids of its two request texts. Those ids are recorded in NOTES as one JSON
object (prefix "kvzip pass_prompt: "), which the C++ parity test hands to the method's pass as UnitTokens::
pass_prompt would.

Kept sets: KVzipPress masks (attention_patch.py): kept = complement of masked_key_indices (MASKED_KINDS). The scores
kvpress selects from (score_val after the sinks got max + 1) are captured by wrapping compress_post; boundary_tie
flags an exact tie across the global (or, layerwise, per-layer) pruning boundary, and without a tie the kept sets
are checked to be the complement of the bottom-k of those scores with kvpress's budget arithmetic.
"""

from __future__ import annotations

import json
import logging

import torch

import kvpress.presses.kvzip_press as kvzip_module
from kvpress import KVzipPress

VOCAB_LOW, VOCAB_HIGH = 3, 300
CHUNK_SMALL = 48  # L = 128 / 144 (6 of them template head) -> 3 reconstruction chunks

MASKED_KINDS = {"kvzip"}


def _ids(text: str) -> list[int]:
    return [VOCAB_LOW + ord(ch) % (VOCAB_HIGH - VOCAB_LOW) for ch in text]


class StandInTokenizer:
    """What KVzipPress asks of a tokenizer: chat_template, apply_chat_template(tokenize=False), encode."""

    chat_template = "<user>{content}</user><bot>"

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        return cls()

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False, **kwargs):
        assert not tokenize and add_generation_prompt and len(messages) == 1
        return "<user>" + messages[0]["content"] + "</user><bot>"

    def encode(self, text, return_tensors=None, add_special_tokens=False):
        assert return_tensors == "pt" and not add_special_tokens
        return torch.tensor([_ids(text)], dtype=torch.long).reshape(1, -1)


kvzip_module.AutoTokenizer = StandInTokenizer
# KVzipPress warns about its extra passes on every construction.
logging.getLogger(kvzip_module.__name__).setLevel(logging.ERROR)

# The ids kvpress derives with the stand-in (the same expressions as KVzipPress.__call__ / prepare).
PASS_PROMPT = {
    "prefix_length": len(_ids("<user>")),
    "suffix": _ids("</user><bot>"),
    "repeat_first": _ids("\n\nRepeat the previous context exactly."),
    "repeat_next": _ids("\n\nRepeat the part of the previous context exactly, starting with"),
}

NOTES = [
    "kvzip group: kvpress's tokenizer is replaced by a stand-in (one id per character, VOCAB_LOW + ord(c) % 297; "
    "chat template '<user>' + content + '</user><bot>'), so the reconstruction prompt's ids are those below; the "
    "first prefix_length = 6 prompt positions are the 'template head' (not reconstructed)",
    "kvzip pass_prompt: " + json.dumps(PASS_PROMPT, separators=(",", ":")),
    "kvzip kept sets: complement of masked_key_indices (KVzipPress masks); budget: int(N*cr) entries pruned over "
    "all layers (N = layers*Hkv*L), layerwise: int(Hkv*L*cr) per layer; heads keep different counts",
    f"kvzip(chunk_size={CHUNK_SMALL}) reconstructs the context in 3 chunks (the default 2048 takes one)",
    "kvzip boundary_tie: equal scores (score_val as kvpress selects from it) straddle the global pruning boundary "
    "(layerwise: a layer's boundary)",
    "kvzip bf16: the scores are maxima of bf16 attention weights, so exact ties are frequent (most bf16 cases are "
    "flagged) and near-ties one bf16 step apart can swap in a reimplementation whose q.k sums and exp differ from "
    "torch's in the last f32 bits; the f32 cases are matched exactly",
]


# ----------------------------------------------------------------------------------------------------------------
# Scores: score_val after compress_post's sink update (captured per press instance).

def install_recorders(press, log):
    if not isinstance(press, KVzipPress):
        return False
    original = type(press).compress_post

    def compress_post(model):
        original(press, model)
        log.append({"scores": press.score_val[:, 0].clone()})  # [layers, Hkv, L], after sinks = max + 1

    press.compress_post = compress_post
    return True


def _pruned_counts(press, scores, cr):
    n_layers, hkv, length = scores.shape
    if press.layerwise:
        return [int(hkv * length * cr)] * n_layers
    n = int(scores.numel() * cr)
    flat = scores.reshape(-1)
    pruned = torch.topk(-flat, n).indices
    return torch.bincount(pruned // (hkv * length), minlength=n_layers).tolist()


def _tie_at(ascending, k):
    return 0 < k < ascending.numel() and bool(ascending[k - 1] == ascending[k])


def boundary_tie(kind, press, log, kept, cr):
    if kind != "kvzip":
        return None
    (entry,) = log
    scores = entry["scores"].float()
    if press.layerwise:
        counts = _pruned_counts(press, scores, cr)
        return any(_tie_at(scores[l].reshape(-1).sort().values, k) for l, k in enumerate(counts))
    return _tie_at(scores.reshape(-1).sort().values, int(scores.numel() * cr))


def check_budget(label, kind, press, kept, length, cr, where):
    if kind != "kvzip":
        return False
    n_layers, hkv = len(kept), len(kept[0])
    per_layer = [sum(len(h) for h in layer) for layer in kept]
    if press.layerwise:
        expected = hkv * length - int(hkv * length * cr)
        assert per_layer == [expected] * n_layers, f"{where}: layerwise kvzip keeps {per_layer}, not {expected}"
    else:
        total = n_layers * hkv * length
        assert sum(per_layer) == total - int(total * cr), f"{where}: kvzip keeps {sum(per_layer)} in all"
    for layer in kept:
        for head in layer:
            assert head[:press.n_sink] == list(range(press.n_sink)), f"{where}: a sink was evicted"
    return True


def check_against_scores(kind, log, kept, tie, where):
    if kind != "kvzip":
        return False
    if tie:
        return True
    (entry,) = log
    scores = entry["scores"].float()
    n_layers, hkv, length = scores.shape
    totals = [sum(len(h) for h in layer) for layer in kept]
    for layer in range(n_layers):
        n_pruned = hkv * length - totals[layer]
        pruned = set(torch.topk(-scores[layer].reshape(-1), n_pruned).indices.tolist())
        expected = [[j for j in range(length) if h * length + j not in pruned] for h in range(hkv)]
        assert expected == kept[layer], f"{where}: layer {layer} kept set is not the complement of the bottom-k"
    return True


# ----------------------------------------------------------------------------------------------------------------

def kvzip_method(variant="kvzip", layerwise=False, chunk_size=2048):
    return {"id": "kvzip", "variant": variant,
            "params": {"layerwise": layerwise, "n_sink": 4, "chunk_size": chunk_size}, "scorer": None}


def press_table():
    """(label, registry, factory(cr), method, attn, kind) as the main script's press_table()."""
    return [
        ("kvzip", None, lambda cr: KVzipPress(compression_ratio=cr), kvzip_method(), "sdpa", "kvzip"),
        ("kvzip(layerwise=True)", None, lambda cr: KVzipPress(compression_ratio=cr, layerwise=True),
         kvzip_method(layerwise=True), "sdpa", "kvzip"),
        ("kvzip_plus", None, lambda cr: KVzipPress(compression_ratio=cr, kvzip_plus_normalization=True),
         kvzip_method("kvzip_plus"), "sdpa", "kvzip"),
        (f"kvzip(chunk_size={CHUNK_SMALL})", None, lambda cr: KVzipPress(compression_ratio=cr, chunk_size=CHUNK_SMALL),
         kvzip_method(chunk_size=CHUNK_SMALL), "sdpa", "kvzip"),
    ]
