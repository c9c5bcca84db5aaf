#!/usr/bin/env python3
"""kvpress golden fixtures: the KV positions real kvpress keeps on the tiny golden models.

What it writes: tests/golden/kvpress/kept.json (read by the C++ kvpress parity test of methods/), compact JSON:
  {"generator", "versions": {"kvpress", "torch", "transformers", "python", "numpy"}, "torch_threads": 1,
   "sdpa_kernel", "notes": [...],
   "prompts": [{"id": "llama-p0", "model": "llama", "context_ids": [...], "question_ids": [...]}],
   "cases": [{"model": "llama", "dtype": "f32"|"bf16", "attn": "sdpa"|"eager", "prompt": "llama-p0",
              "press": "adakv(snapkv)", "registry": kvpress evaluate_registry name or null,
              "method": {"id", "variant", "params", "scorer": null | {same shape}},  (as in methods/catalog.cpp)
              "kvpress": "AdaKVPress(press=SnapKVPress(window_size=64, kernel_size=5), alpha_safeguard=0.2)",
              "protocol": "query-agnostic"|"query-aware", "compression": 0.5, "length": L,
              "boundary_tie": bool, "kept": [[[pos, ...] per KV head, ascending] per layer]}]}
  kept[l][h] lists the context positions (0-based, ascending) that survive in layer l, KV head h after kvpress
  compressed the prefill. Query-agnostic: the prefill is context_ids only (L = len(context_ids)); query-aware:
  the prefill is context_ids + question_ids (L = len(context) + len(question)). boundary_tie: at some selection
  stage of the case (any layer/head), scores on both sides of the selection boundary are exactly equal (in the
  dtype kvpress scores in) in a way that can change the kept set, so a reimplementation may legitimately keep
  another set (torch's CPU topk breaks ties in no fixed index order). For the two-stage presses (AdaKV's
  safeguard, CriticalKV's stage 1) a stage-1 tie counts only if the tied group would not be kept whole whichever
  of its members were promoted; every BlockPress step counts (later anchors depend on the kept set).

How the kept sets are obtained (no reimplementation of any press): the model runs the prefill under
`with press(model):` into a DynamicCache; a second run without a press gives the full post-RoPE keys (the press
hook runs after each layer's attention and does not change the hidden states, so both runs compute bit-identical
keys). Pruning presses: every row of the compressed cache is matched (exact bytes) to its row in the full keys of
the same layer and KV head (the full rows are asserted distinct, every compressed row must match). Masking
presses (AdaKV): kept = complement of `self_attn.masked_key_indices` (the cache stays full length; the script
checks it equals the full keys); without boundary ties, the kept set is also checked to be the top-k of the
scores the press computed (ScorerPress-based presses and AdaKV). Boundary ties are flagged from the scores the
presses compute (their `score()` is wrapped to capture its return value); only ChunkKV's chunk means and
CriticalKV's (s + epsilon) * ||W_o V||_1 (with kvpress's own vwl1norm) are recomputed, for the tie flag alone.
Checks: each case is run twice and must give the same kept sets; kept counts are checked against kvpress's
budget formulas (ScorerPress n_kept = max(1, int(L*(1-cr))), AdaKV per-layer total Hkv*n_kept and n_safe per head,
StreamingLLM sinks + recent, ChunkKV whole chunks shared by all heads, PyramidKV's per-layer budget); the
transformers 5.2 forward used here is checked bit-for-bit against the keys and logits of
tests/golden/tiny_models/reference.safetensors (transformers 5.24, the version the C++ runtime is tested against).

Presses (kvpress defaults unless stated; compression 0.25, 0.5, 0.75, 0.9; both protocols):
  SnapKVPress, SnapKVPress(window_size=16) (with window 64 and L = 128 every cr >= 0.75 keeps only window
  positions, which all score max+1: a tie), TOVAPress, ExpectedAttentionPress, AdaKVPress(SnapKVPress()),
  AdaKVPress(ExpectedAttentionPress()),
  AdaKVPress(ExpectedAttentionPress(epsilon=1e-2)) (registry "expected_attention"), KnormPress, KeyDiffPress,
  BlockPress(KeyDiffPress(), block_size=32) (the registry's 128 is >= L here, which makes BlockPress identical to
  one-shot KeyDiff), StreamingLLMPress, ObservedAttentionPress (eager), PyramidKVPress,
  PyramidKVPress(window_size=16) (with the default window 64 and L <= 144 the pyramid budget always falls back to
  round(L*(1-cr)); window 16 exercises the per-layer pyramid), ChunkKVPress(SnapKVPress()),
  CriticalKVPress(SnapKVPress()), CriticalKVPress(ExpectedAttentionPress(use_vnorm=False)).
  RandomPress is skipped: its scores come from torch's RNG and cannot be matched outside torch.
Models: tests/golden/tiny_models/<model>/<dtype>: llama, llama3_rope, qwen2, mistral in f32, llama in bf16;
  one seeded prompt per model (random ids in [3, 300): 128 context + 16 question tokens), two for llama f32.
Run on the CPU with torch.set_num_threads(1), torch.use_deterministic_algorithms(True); sdpa is pinned to the
CPU flash kernel (torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION])) as in make_model_golden.py.

Versions: kvpress 0.5.5 (PyPI), transformers 5.2.0 (kvpress 0.5.5 requires transformers>=4.56,<5.3, so it cannot
share tools/.venv, which has transformers 5.24), torch 2.15.0 (the same as tools/.venv), Python 3.11.7; every
package is pinned in tools/golden/requirements-kvpress.txt.

Press groups (--group NAME): the presses added after the first set live in tools/golden/kvpress_groups/NAME.py,
one module per group, written to tests/golden/kvpress/kept_NAME.json (same document shape; the C++ parity test
reads every kept*.json). A group module defines press_table() (the tuples of press_table() below) and may define:
  NOTES: list of str                        appended to the document's notes
  MASKED_KINDS: set of kind names           read kept sets from masked_key_indices (as "adakv")
  check_budget(label, kind, press, kept, length, cr, where) -> bool   True when it checked the case's counts
  boundary_tie(kind, press, log, kept, cr) -> bool | None              None: not its kind
  check_against_scores(kind, log, kept, tie, where) -> bool            True when it handled the kind
  install_recorders(press, log) -> bool                                True when it installed its own
  run_press(model, attn, ids, press) -> keys per layer                 a press that needs more than one prefill
  budget_axis(label) -> (axis, values) | None   None: ("compression", COMPRESSIONS); ("threshold", values): the
                                            press has no compression ratio (simlayerkv), factory(t) gets each
                                            threshold t and its cases carry "threshold": t and "compression": 0
  runs_on(label, model, dtype) -> bool         False: no cases of that press on that model/dtype (e.g. a press
                                            whose bf16 scores tie in every case, which the parity test cannot judge)
  case_extra(label, kind, press) -> dict | None   extra fields of the case (the last run's press), e.g. the
                                            re-rotated keys of KeyRerotationPress (group wrappers)
Rerun (from the repository root; the venv is git-ignored, ~6 GB because PyPI's torch pulls CUDA libraries, which
stay unused on the CPU):
  python3.11 -m venv tools/.venv-kvpress
  tools/.venv-kvpress/bin/pip install -r tools/golden/requirements-kvpress.txt
  tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py [--out tests/golden/kvpress/kept.json]
  tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group NAME   # kept_NAME.json
(the install took about 2 minutes here). Reruns are byte-identical (checked by running the script twice and
comparing the files with cmp); a run takes about 20 seconds on one core.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import math
import platform
import sys
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
import transformers
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import DynamicCache

import kvpress
from kvpress import (
    AdaKVPress,
    BlockPress,
    ChunkKVPress,
    CriticalKVPress,
    ExpectedAttentionPress,
    KeyDiffPress,
    KnormPress,
    ObservedAttentionPress,
    PyramidKVPress,
    SnapKVPress,
    StreamingLLMPress,
    TOVAPress,
)
from kvpress.presses.scorer_press import ScorerPress

SEED = 20250611
VOCAB_LOW, VOCAB_HIGH = 3, 300  # ids 0..2 are special tokens of the tiny models
CONTEXT_LENGTH = 128
QUESTION_LENGTH = 16
COMPRESSIONS = (0.25, 0.5, 0.75, 0.9)
PROTOCOLS = ("query-agnostic", "query-aware")
BLOCK_SIZE = 32
SMALL_WINDOW = 16
# (model, dtype, number of prompts)
MODELS = (("llama", "f32", 2), ("llama3_rope", "f32", 1), ("qwen2", "f32", 1), ("mistral", "f32", 1),
          ("llama", "bf16", 1))
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "golden" / "tiny_models"


# ----------------------------------------------------------------------------------------------------------------
# Press table: label, registry name, constructor (compression -> press), method config (catalog ids/params), attn.

def snapkv_method(window=64, kernel_size=5):
    return {"id": "snapkv", "variant": "kvpress",
            "params": {"window": window, "kernel_size": kernel_size, "pooling": "avg"}, "scorer": None}


def ea_method(epsilon=0.0, use_vnorm=True):
    return {"id": "expected_attention", "variant": None,
            "params": {"n_future_positions": 512, "n_sink": 4, "use_covariance": True, "use_vnorm": use_vnorm,
                       "epsilon": epsilon}, "scorer": None}


def plain(method_id, variant=None, **params):
    return {"id": method_id, "variant": variant, "params": params, "scorer": None}


def press_table():
    """(label, registry, factory(cr), method, attn, kind). kind selects the tie check."""
    return [
        ("snapkv", "snapkv", lambda cr: SnapKVPress(compression_ratio=cr), snapkv_method(), "sdpa", "scorer"),
        (f"snapkv(window={SMALL_WINDOW})", None,
         lambda cr: SnapKVPress(compression_ratio=cr, window_size=SMALL_WINDOW), snapkv_method(window=SMALL_WINDOW),
         "sdpa", "scorer"),
        ("tova", "tova", lambda cr: TOVAPress(compression_ratio=cr), plain("tova", "kvpress"), "sdpa", "scorer"),
        ("expected_attention", None, lambda cr: ExpectedAttentionPress(compression_ratio=cr), ea_method(), "sdpa",
         "scorer"),
        ("adakv(snapkv)", "adakv_snapkv", lambda cr: AdaKVPress(SnapKVPress(compression_ratio=cr)),
         {"id": "adakv", "variant": "kvpress", "params": {"alpha": 0.2}, "scorer": snapkv_method()}, "sdpa",
         "adakv"),
        ("adakv(expected_attention)", None,
         lambda cr: AdaKVPress(ExpectedAttentionPress(compression_ratio=cr)),
         {"id": "adakv", "variant": "kvpress", "params": {"alpha": 0.2}, "scorer": ea_method()}, "sdpa", "adakv"),
        ("adakv(expected_attention,epsilon=0.01)", "expected_attention",
         lambda cr: AdaKVPress(ExpectedAttentionPress(compression_ratio=cr, epsilon=1e-2)),
         {"id": "adakv", "variant": "kvpress", "params": {"alpha": 0.2}, "scorer": ea_method(epsilon=0.01)},
         "sdpa", "adakv"),
        ("knorm", "knorm", lambda cr: KnormPress(compression_ratio=cr), plain("knorm"), "sdpa", "scorer"),
        ("keydiff", "keydiff", lambda cr: KeyDiffPress(compression_ratio=cr),
         plain("keydiff", "oneshot", block_size=128), "sdpa", "scorer"),
        (f"block(keydiff,block_size={BLOCK_SIZE})", None,
         lambda cr: BlockPress(KeyDiffPress(compression_ratio=cr), block_size=BLOCK_SIZE),
         plain("keydiff", "block", block_size=BLOCK_SIZE), "sdpa", "block"),
        ("streaming_llm", "streaming_llm", lambda cr: StreamingLLMPress(compression_ratio=cr),
         plain("streaming_llm", n_sink=4), "sdpa", "scorer"),
        ("observed_attention", "observed_attention", lambda cr: ObservedAttentionPress(compression_ratio=cr),
         plain("observed_attention"), "eager", "scorer"),
        ("pyramidkv", "pyramidkv", lambda cr: PyramidKVPress(compression_ratio=cr),
         plain("pyramidkv", window=64, kernel_size=5, beta=20), "sdpa", "scorer"),
        (f"pyramidkv(window={SMALL_WINDOW})", None,
         lambda cr: PyramidKVPress(compression_ratio=cr, window_size=SMALL_WINDOW),
         plain("pyramidkv", window=SMALL_WINDOW, kernel_size=5, beta=20), "sdpa", "scorer"),
        ("chunkkv(snapkv)", "chunkkv", lambda cr: ChunkKVPress(SnapKVPress(compression_ratio=cr), chunk_length=20),
         {"id": "chunkkv", "variant": None, "params": {"chunk_length": 20}, "scorer": snapkv_method()}, "sdpa",
         "chunkkv"),
        ("criticalkv(snapkv)", "critical_snapkv", lambda cr: CriticalKVPress(SnapKVPress(compression_ratio=cr)),
         {"id": "criticalkv", "variant": None, "params": {"first_stage_ratio": 0.5, "epsilon": 1e-4},
          "scorer": snapkv_method()}, "sdpa", "critical"),
        ("criticalkv(expected_attention,use_vnorm=false)", "critical_expected_attention",
         lambda cr: CriticalKVPress(ExpectedAttentionPress(compression_ratio=cr, use_vnorm=False)),
         {"id": "criticalkv", "variant": None, "params": {"first_stage_ratio": 0.5, "epsilon": 1e-4},
          "scorer": ea_method(use_vnorm=False)}, "sdpa", "critical"),
    ]


def press_repr(press) -> str:
    """Constructor-like description without compression_ratio (the case records it separately)."""
    name = type(press).__name__
    if isinstance(press, CriticalKVPress):
        return f"{name}(press={press_repr(press.press)}, epsilon={press.epsilon}, " \
               f"first_stage_ratio={press.first_stage_ratio})"
    fields = []
    for field in press.__dataclass_fields__:
        if field == "compression_ratio":
            continue
        value = getattr(press, field)
        fields.append(f"{field}={press_repr(value) if isinstance(value, kvpress.BasePress) else value!r}")
    return f"{name}({', '.join(fields)})"


def inner_scorer(press):
    return press.press if hasattr(press, "press") else None


# ----------------------------------------------------------------------------------------------------------------
# Running the model.

def load(model_name: str, dtype_name: str, attn: str):
    directory = TINY / model_name / dtype_name
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=DTYPES[dtype_name],
                                                              attn_implementation=attn)
    model.eval()
    assert next(model.parameters()).dtype == DTYPES[dtype_name]
    return model


def attention_context(attn: str):
    if attn == "sdpa":
        return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    return torch.no_grad()


def attention_modules(model):
    return [layer.self_attn for layer in model.model.layers]


@torch.no_grad()
def prefill(model, attn: str, ids: list[int], press=None):
    """Runs the prefill (under the press if given); returns (cache keys per layer, logits)."""
    for module in attention_modules(model):
        module.masked_key_indices = None
    cache = DynamicCache()
    input_ids = torch.tensor([ids], dtype=torch.long)
    with attention_context(attn):
        if press is None:
            out = model(input_ids=input_ids, past_key_values=cache, use_cache=True)
        else:
            with press(model):
                out = model(input_ids=input_ids, past_key_values=cache, use_cache=True)
    keys = [layer.keys[0].clone() for layer in cache.layers]  # [Hkv, n, d]
    return keys, out.logits[0]


class ScoreRecorder:
    """Wraps a press instance's score() to capture what it returns (reference kept, plus a clone)."""

    def __init__(self, press, role: str, log: list):
        self.press, self.role, self.log = press, role, log
        self.original = type(press).score

    def __call__(self, module, hidden_states, keys, values, attentions, kwargs):
        scores = self.original(self.press, module, hidden_states, keys, values, attentions, kwargs)
        self.log.append({"role": self.role, "layer": module.layer_idx, "ref": scores, "raw": scores.clone(),
                         "length": keys.shape[2], "values": values, "module": module})
        return scores


def install_recorders(press, log: list):
    inner = inner_scorer(press)
    if isinstance(press, ScorerPress):
        press.score = ScoreRecorder(press, "outer", log)
    if inner is not None:
        inner.score = ScoreRecorder(inner, "inner", log)


def match_rows(full: torch.Tensor, compressed: torch.Tensor, where: str) -> list[int]:
    """full [L, d], compressed [n, d] of one head: the full-row index of each compressed row (exact bytes)."""
    index = {}
    for i, row in enumerate(full):
        key = row.contiguous().view(torch.uint8).numpy().tobytes() if row.dtype == torch.bfloat16 \
            else row.numpy().tobytes()
        assert key not in index, f"{where}: full key rows {index.get(key)} and {i} are equal"
        index[key] = i
    out = []
    for row in compressed:
        key = row.contiguous().view(torch.uint8).numpy().tobytes() if row.dtype == torch.bfloat16 \
            else row.numpy().tobytes()
        assert key in index, f"{where}: a compressed key row matches no full key row"
        out.append(index[key])
    assert len(set(out)) == len(out), f"{where}: a full key row was kept twice"
    return out


def kept_sets(model, full_keys, press_keys, masked: bool, where: str):
    kept = []
    modules = attention_modules(model)
    for layer, (full, comp) in enumerate(zip(full_keys, press_keys)):
        hkv, length, _ = full.shape
        per_head = []
        if masked:
            assert torch.equal(full, comp), f"{where}: a masking press changed the cache of layer {layer}"
            indices = modules[layer].masked_key_indices
            assert indices is not None, f"{where}: layer {layer} has no masked_key_indices"
            _, heads, positions = indices
            for h in range(hkv):
                evicted = set(positions[heads == h].tolist())
                assert len(evicted) == int((heads == h).sum()), f"{where}: duplicate masked index"
                per_head.append([j for j in range(length) if j not in evicted])
        else:
            for h in range(hkv):
                per_head.append(sorted(match_rows(full[h], comp[h], f"{where} layer {layer} head {h}")))
        kept.append(per_head)
    return kept


# ----------------------------------------------------------------------------------------------------------------
# Budget formulas (kvpress 0.5.5) used only to check the extracted kept sets.

def n_kept_formula(length: int, cr: float) -> int:
    return max(1, int(length * (1 - cr)))


def pyramid_budget(length: int, cr: float, window: int, beta: int, layer: int, n_layers: int) -> int:
    cap = window + length * (1 - cr)
    min_num = (cap - window) / beta
    max_num = (cap - window) * 2 - min_num
    if max_num >= length - window:
        max_num = length - window
        min_num = (cap - window) * 2 - max_num
    if not (length >= max_num >= min_num >= window):
        return max(1, round(length * (1 - cr)))
    steps = (max_num - min_num) / (n_layers - 1) if n_layers > 1 else 0.0
    return round(max_num - layer * steps)


def check_budget(label: str, kind: str, press, kept, length: int, cr: float, where: str):
    n_layers = len(kept)
    n_kept = n_kept_formula(length, cr)
    for layer, per_head in enumerate(kept):
        counts = [len(h) for h in per_head]
        if kind == "adakv":
            n_safe = max(1, int(n_kept * 0.2))
            assert sum(counts) == len(counts) * n_kept, f"{where}: AdaKV layer {layer} keeps {counts}"
            assert min(counts) >= n_safe, f"{where}: AdaKV head below n_safe {n_safe}: {counts}"
        elif label.startswith("pyramidkv"):
            expected = pyramid_budget(length, cr, press.window_size, press.beta, layer, n_layers)
            assert counts == [expected] * len(counts), f"{where}: pyramid layer {layer} {counts} != {expected}"
        elif kind == "chunkkv":
            chunk = press.chunk_length
            n_chunks = math.ceil(length / chunk)
            kept_chunks = max(1, int(n_chunks * (1 - cr)))
            first = per_head[0]
            assert all(h == first for h in per_head), f"{where}: ChunkKV heads differ"
            chunks = sorted({j // chunk for j in first})
            assert len(chunks) == kept_chunks, f"{where}: ChunkKV keeps {len(chunks)} chunks, not {kept_chunks}"
            expected = [j for c in chunks for j in range(c * chunk, min((c + 1) * chunk, length))]
            assert first == expected, f"{where}: ChunkKV kept set is not a union of whole chunks"
        else:
            assert counts == [n_kept] * len(counts), f"{where}: layer {layer} keeps {counts}, formula {n_kept}"
            if label == "streaming_llm":
                n_pruned = length - int(length * (1 - cr))
                expected = list(range(4)) + list(range(4 + n_pruned, length))
                assert all(h == expected for h in per_head), f"{where}: StreamingLLM kept set"
            if label == "tova":
                assert all(h == per_head[0] for h in per_head), f"{where}: TOVA heads differ"


def check_against_scores(kind: str, log: list, kept, tie: bool, where: str):
    """Cross-check of the key-row matching: without ties, the kept set is the top-k of the captured final scores."""
    if tie or kind not in ("scorer", "critical", "adakv"):
        return
    for layer, per_head in enumerate(kept):
        entries = [e for e in log if e["layer"] == layer]
        if kind == "adakv":
            (entry,) = entries
            scores = entry["ref"][0]  # after kvpress's in-place safeguard
            total = sum(len(h) for h in per_head)
            top = scores.reshape(-1).topk(total).indices
            length = scores.shape[1]
            expected = [sorted(int(i) % length for i in top if int(i) // length == h) for h in range(len(per_head))]
        else:
            (entry,) = [e for e in entries if e["role"] == "outer"]
            scores = entry["raw"][0]
            expected = [sorted(scores[h].topk(len(ids)).indices.tolist()) for h, ids in enumerate(per_head)]
        assert expected == per_head, f"{where}: layer {layer} kept set is not the top-k of the press's scores"


# ----------------------------------------------------------------------------------------------------------------
# Boundary ties: equal scores on both sides of a selection boundary.

def tie_at(sorted_desc: torch.Tensor, k: int) -> bool:
    return 0 < k < sorted_desc.numel() and bool(sorted_desc[k - 1] == sorted_desc[k])


def head_ties(scores: torch.Tensor, counts: list[int]) -> bool:
    """scores [Hkv, L] (one batch row); counts: kept per head. A tie straddles some head's boundary."""
    return any(tie_at(scores[h].sort(descending=True).values, k) for h, k in enumerate(counts))


def promotion_is_ambiguous(raw: torch.Tensor, budgets: list[int], final_scores, final_keep: int,
                           per_head_final: bool) -> bool:
    """Two-stage presses (AdaKV safeguard, CriticalKV stage 1) promote the top budgets[h] entries of raw[h] to
    finfo.max, then select final_keep entries by final_scores(raw_with_promotions). When a stage-1 boundary is tied,
    kvpress's choice among the tied group G could matter. It cannot if, promoting only the entries strictly above
    the tied value, every member of G still lands strictly inside the final selection: then any choice of promoted
    members of G leaves the same final set (promoting a member that is kept anyway frees no slot for anybody else).
    Returns True when the choice may matter."""
    hkv = raw.shape[0]
    promoted = torch.zeros_like(raw, dtype=torch.bool)
    groups = []
    for h in range(hkv):
        ordered = raw[h].sort(descending=True).values
        k = budgets[h]
        if tie_at(ordered, k):
            value = ordered[k - 1]
            promoted[h] = raw[h] > value
            groups.append((h, raw[h] == value))
        else:
            promoted[h] = raw[h] >= ordered[k - 1] if k > 0 else False
    if not groups:
        return False
    scores = final_scores(raw.masked_fill(promoted, torch.finfo(raw.dtype).max))
    if per_head_final:
        keep = torch.zeros_like(raw, dtype=torch.bool)
        for h in range(hkv):
            ordered = scores[h].sort(descending=True)
            if tie_at(ordered.values, final_keep):
                return True
            keep[h, ordered.indices[:final_keep]] = True
    else:
        ordered = scores.reshape(-1).sort(descending=True)
        if tie_at(ordered.values, final_keep):
            return True
        keep = torch.zeros(raw.numel(), dtype=torch.bool)
        keep[ordered.indices[:final_keep]] = True
        keep = keep.view_as(raw)
    return any(not bool(keep[h][group].all()) for h, group in groups)


def boundary_tie(kind: str, press, log: list, kept, cr: float) -> bool:
    """True when some selection stage of the case had equal scores across its boundary in a way that may change
    the kept set (kvpress's CPU topk breaks such ties in no documented order)."""
    by_layer = {}
    for entry in log:
        by_layer.setdefault(entry["layer"], []).append(entry)
    tie = False
    for layer, per_head in enumerate(kept):
        entries = by_layer[layer]
        counts = [len(h) for h in per_head]
        length = entries[0]["length"]
        n_kept = n_kept_formula(length, cr)
        if kind == "scorer":
            (entry,) = entries
            tie |= head_ties(entry["raw"][0], counts)
        elif kind == "critical":
            outer = [e for e in entries if e["role"] == "outer"]
            inner = [e for e in entries if e["role"] == "inner"]
            assert len(outer) == 1 and len(inner) == 1
            stage1 = max(1, int((1 - cr) * length * press.first_stage_ratio))
            norm = CriticalKVPress.vwl1norm(inner[0]["values"], inner[0]["module"])[0]

            def critical_final(promoted_raw, norm=norm, raw=inner[0]["raw"][0]):
                # kvpress: scores = (scores + epsilon) * norm, then the stage-1 entries are set to finfo.max
                top = promoted_raw == torch.finfo(raw.dtype).max
                return ((raw + press.epsilon) * norm).masked_fill(top, torch.finfo(raw.dtype).max)

            tie |= promotion_is_ambiguous(inner[0]["raw"][0], [stage1] * len(counts), critical_final, n_kept, True)
            tie |= head_ties(outer[0]["raw"][0], counts)
        elif kind == "adakv":
            (entry,) = entries
            n_safe = max(1, int(n_kept * press.alpha_safeguard))
            tie |= promotion_is_ambiguous(entry["raw"][0], [n_safe] * len(counts), lambda s: s,
                                          len(counts) * n_kept, False)
            flat = entry["ref"][0].reshape(-1).sort(descending=True).values  # after kvpress's in-place safeguard
            tie |= tie_at(flat, len(counts) * n_kept)
        elif kind == "block":
            for entry in entries:  # any tie in any block step (later anchors depend on the kept set)
                tie |= head_ties(entry["raw"][0], [n_kept] * len(counts))
        elif kind == "chunkkv":
            (entry,) = entries
            scores = entry["raw"][0]  # [Hkv, L]
            chunk = press.chunk_length
            full_chunks, rest = divmod(length, chunk)
            means = [scores[:, c * chunk:(c + 1) * chunk].sum(dim=0).mean() for c in range(full_chunks)]
            if rest:
                means.append(scores[:, -rest:].sum(dim=0).mean())
            chunk_scores = torch.stack(means)
            tie |= tie_at(chunk_scores.sort(descending=True).values, max(1, int(len(means) * (1 - cr))))
        else:
            raise ValueError(kind)
    return tie


# ----------------------------------------------------------------------------------------------------------------

def make_prompts():
    rng = np.random.default_rng(SEED)
    prompts = []
    for model_name, dtype_name, count in MODELS:
        for p in range(count):
            pid = f"{model_name}-p{p}" if dtype_name == "f32" else f"{model_name}-{dtype_name}-p{p}"
            context = rng.integers(VOCAB_LOW, VOCAB_HIGH, CONTEXT_LENGTH).tolist()
            question = rng.integers(VOCAB_LOW, VOCAB_HIGH, QUESTION_LENGTH).tolist()
            prompts.append({"id": pid, "model": model_name, "dtype": dtype_name, "context_ids": context,
                            "question_ids": question})
    return prompts


def check_against_model_reference(notes: list):
    """The transformers used here must compute exactly the keys/logits of the committed model reference."""
    reference = json.loads((TINY / "reference.json").read_text())
    tensors = safetensors.torch.load_file(str(TINY / "reference.safetensors"))
    p = reference["key_value_prompt"]
    prompt = reference["prompts"][p]
    checked = 0
    for model_name, dtype_name, _ in MODELS:
        for attn in ("sdpa", "eager"):
            model = load(model_name, dtype_name, attn)
            keys, logits = prefill(model, attn, prompt)
            base = f"{model_name}.{dtype_name}.{attn}"
            assert torch.equal(logits.float(), tensors[f"{base}.logits.{p}"]), f"{base}: logits differ"
            for layer, k in enumerate(keys):
                assert torch.equal(k.float(), tensors[f"{base}.keys.{p}.layer{layer}"]), f"{base}: keys differ"
            checked += 1
    notes.append(f"transformers {transformers.__version__} reproduces bit-for-bit the logits and post-RoPE keys of "
                 f"tests/golden/tiny_models/reference.safetensors (transformers "
                 f"{reference['versions']['transformers']}) for prompt {p}, {checked} model/dtype/attn runs")


class Hooks:
    """The group module's optional hooks, falling back to this script's own functions."""

    def __init__(self, group):
        self.group = group

    def get(self, name):
        return getattr(self.group, name, None) if self.group is not None else None

    def notes(self):
        return list(self.get("NOTES") or [])

    def masked(self, kind):
        return kind == "adakv" or kind in (self.get("MASKED_KINDS") or set())

    def install_recorders(self, press, log):
        hook = self.get("install_recorders")
        if hook is None or not hook(press, log):
            install_recorders(press, log)

    def run_press(self, model, attn, ids, press):
        hook = self.get("run_press")
        return hook(model, attn, ids, press) if hook is not None else prefill(model, attn, ids, press)[0]

    def check_budget(self, label, kind, press, kept, length, cr, where):
        hook = self.get("check_budget")
        if hook is None or not hook(label, kind, press, kept, length, cr, where):
            check_budget(label, kind, press, kept, length, cr, where)

    def boundary_tie(self, kind, press, log, kept, cr):
        hook = self.get("boundary_tie")
        tie = hook(kind, press, log, kept, cr) if hook is not None else None
        return boundary_tie(kind, press, log, kept, cr) if tie is None else tie

    def budget_axis(self, label):
        hook = self.get("budget_axis")
        axis = hook(label) if hook is not None else None
        return axis if axis is not None else ("compression", COMPRESSIONS)

    def runs_on(self, label, model_name, dtype_name):
        hook = self.get("runs_on")
        return True if hook is None else bool(hook(label, model_name, dtype_name))

    def case_extra(self, label, kind, press):
        hook = self.get("case_extra")
        return (hook(label, kind, press) or {}) if hook is not None else {}

    def check_against_scores(self, kind, log, kept, tie, where):
        hook = self.get("check_against_scores")
        if hook is None or not hook(kind, log, kept, tie, where):
            check_against_scores(kind, log, kept, tie, where)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", help="press group module tools/golden/kvpress_groups/GROUP.py "
                                        "(default: the first press set of this script)")
    parser.add_argument("--out", type=Path,
                        help="output (default tests/golden/kvpress/kept.json, or kept_GROUP.json)")
    args = parser.parse_args()
    group = None
    if args.group:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        group = importlib.import_module(f"kvpress_groups.{args.group}")
    hooks = Hooks(group)
    if args.out is None:
        name = f"kept_{args.group}.json" if args.group else "kept.json"
        args.out = REPO / "tests" / "golden" / "kvpress" / name

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(SEED)

    notes = []
    check_against_model_reference(notes)
    prompts = make_prompts()
    table = group.press_table() if group is not None else press_table()
    cases = []
    tie_count = 0
    for prompt in prompts:
        model_name, dtype_name = prompt["model"], prompt["dtype"]
        models = {attn: load(model_name, dtype_name, attn) for attn in ("sdpa", "eager")}
        for protocol in PROTOCOLS:
            ids = prompt["context_ids"] + (prompt["question_ids"] if protocol == "query-aware" else [])
            length = len(ids)
            full = {attn: prefill(m, attn, ids)[0] for attn, m in models.items()}
            for label, registry, factory, method, attn, kind in table:
                if not hooks.runs_on(label, model_name, dtype_name):
                    continue
                model = models[attn]
                axis, budgets = hooks.budget_axis(label)
                for budget in budgets:
                    cr = budget if axis == "compression" else 0.0
                    where = f"{prompt['id']} {protocol} {label} " + \
                        (f"cr={cr}" if axis == "compression" else f"{axis}={budget}")
                    runs = []
                    for _ in range(2):
                        press = factory(budget)
                        log = []
                        hooks.install_recorders(press, log)
                        keys = hooks.run_press(model, attn, ids, press)
                        kept = kept_sets(model, full[attn], keys, hooks.masked(kind), where)
                        runs.append((kept, hooks.boundary_tie(kind, press, log, kept, cr)))
                    assert runs[0] == runs[1], f"{where}: two runs differ"
                    kept, tie = runs[0]
                    hooks.check_budget(label, kind, press, kept, length, cr, where)
                    hooks.check_against_scores(kind, log, kept, tie, where)
                    tie_count += tie
                    cases.append({"model": model_name, "dtype": dtype_name, "attn": attn, "prompt": prompt["id"],
                                  "press": label, "registry": registry, "method": method,
                                  "kvpress": press_repr(press), "protocol": protocol, "compression": cr,
                                  **({axis: budget} if axis != "compression" else {}),
                                  "length": length, "boundary_tie": tie, "kept": kept,
                                  **hooks.case_extra(label, kind, press)})
            print(f"{prompt['id']} {protocol}: done", file=sys.stderr)

    if group is not None:
        notes += hooks.notes()
    notes += [
        "kept[l][h]: ascending context positions kept in layer l, KV head h; every case was run twice with "
        "identical results, and kept counts match kvpress's budget formulas",
        "query-agnostic: the press compresses the prefill of context_ids (L = 128); query-aware: the prefill of "
        "context_ids + question_ids (L = 144); positions start at 0, no special tokens are added",
        "masking presses (adakv) do not shorten the cache: kept = complement of self_attn.masked_key_indices",
        "boundary_tie: at some selection stage (any layer or head) scores equal across the selection boundary may "
        "change the kept set (torch's CPU topk breaks ties in no index order), so a reimplementation may "
        "legitimately keep another set; two-stage presses (adakv safeguard, criticalkv stage 1) flag a stage-1 tie "
        "only if the tied group is not kept whole whichever members were promoted",
    ]
    if group is None:
        notes += [
            f"block(keydiff) uses block_size {BLOCK_SIZE}: with kvpress's 128 >= L the block loop is a single step "
            "identical to one-shot keydiff",
            f"pyramidkv with the default window 64 always takes kvpress's fallback budget round(L*(1-cr)) for "
            f"L <= 144; pyramidkv(window={SMALL_WINDOW}) exercises the per-layer pyramid",
            f"snapkv with the default window 64 keeps only window positions (all scored max+1, a tie) for cr >= 0.75 "
            f"at L = 128; snapkv(window={SMALL_WINDOW}) scores most positions by attention",
            "observed_attention runs with attn_implementation eager (kvpress asserts it); all others with sdpa "
            "pinned to the CPU flash kernel",
            "RandomPress is not included: its scores come from torch's global RNG",
            "method.variant is null for catalog methods without variants; keydiff oneshot carries the catalog's "
            "block_size default (unused by the oneshot variant)",
        ]
    doc = {
        "generator": "tools/golden/make_kvpress_golden.py" + (f" --group {args.group}" if args.group else ""),
        "seed": SEED,
        "versions": {"kvpress": importlib.metadata.version("kvpress"),
                     "torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version(), "numpy": np.__version__},
        "torch_threads": torch.get_num_threads(),
        "sdpa_kernel": "torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION])",
        "notes": notes,
        "prompts": [{k: v for k, v in p.items() if k != "dtype"} for p in prompts],
        "cases": cases,
    }
    text = json.dumps(doc, separators=(",", ":")) + "\n"
    # One case per line keeps diffs readable without pretty-printing the arrays.
    text = text.replace(',{"model":', ',\n{"model":')
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}: {len(cases)} cases, {tie_count} with boundary ties, {len(text)} bytes",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
