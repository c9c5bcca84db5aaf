"""Press group artefacts: QFilterPress, ExpectedAttentionStatsPress, DuoAttentionPress (kvpress 0.5.5)
-> tests/golden/kvpress/kept_artefacts.json.

Run from the repository root: tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group artefacts
(see that script's docstring for the document shape and the group hooks). C++ side: methods/qfilter.h,
methods/expected_attention_stats.h, methods/duo_attention.h; parity test tests/methods/kvpress_parity_test.cpp.

These presses read a learned artefact that kvpress downloads (hub / GitHub). Here the real presses get the files of
tests/golden/artefacts/ (made by tools/golden/make_artefacts_golden.py, mostly with kvpress's own code), loaded
through kvpress's own loaders where it has them, and the C++ methods get the same files through their path
parameters (written relative to the repository root; the parity test resolves them against the source tree):
  qfilter: QFilterPress.load_q_filters is replaced, per press instance, by QFilters.from_pretrained(<local dir>)
    (kvpress calls QFilters.from_pretrained("nthngdy/<model>_qfilt")); the filters are synthetic (see the artefact
    script).
  expected_attention_stats: ExpectedAttentionStatsPress(stats_folder=<local dir>), kvpress's own local path
    (ExpectedAttentionStats.from_pretrained). Two statistics files, computed by kvpress's collect_queries on the tiny
    llama in f32 and in bf16 (stored BF16), each used for every tiny model (all have the same shapes: the parity
    question is whether both sides compute the same scores from one file).
  duo_attention (variant pattern): DuoAttentionPress.load_attention_pattern is replaced, per instance, by the local
    TSV read as kvpress reads the downloaded one (np.loadtxt(..., delimiter="\\t"), clipped to [0, 1]) with the
    case's sink/recent sizes (kvpress takes them from the pattern's config.json).
  duo_attention (variant on_the_fly): DuoAttentionPress(on_the_fly_scoring=True) with kvpress's own
    duo_attention_on_the_fly, whose BookSum samples are replaced by the prompt being compressed (one sample: the
    ids of the prefill; load_dataset and AutoTokenizer replaced inside kvpress's module for the call, the result
    cache cleared before each prefill), i.e. what our on_the_fly variant computes from the capture. kvpress then
    sets sink 128 / recent 256; they are overridden afterwards with the case's sizes (8 / 32), else nothing would
    be evicted at L <= 144.
DuoAttention masks (attention_patch.py): kept = complement of masked_key_indices, budget = head_compression_ratio
(the case's "compression"; kvpress's evaluate.py sets head_compression_ratio from compression_ratio).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import BatchEncoding

import kvpress.presses.duo_attention_press as duo_module
from kvpress import DuoAttentionPress, ExpectedAttentionStatsPress, QFilterPress
from kvpress.presses.qfilter_press import QFilters

REPO = Path(__file__).resolve().parents[3]
ARTEFACTS = "tests/golden/artefacts"
QFILTER_DIR = f"{ARTEFACTS}/qfilter_tiny"
STATS_DIRS = {"f32": f"{ARTEFACTS}/ea_stats_llama_f32", "bf16": f"{ARTEFACTS}/ea_stats_llama_bf16"}
DUO_PATTERN = f"{ARTEFACTS}/duo_pattern_llama_f32.tsv"
DUO_SINK, DUO_RECENT = 8, 32

MASKED_KINDS = {"duo"}

NOTES = [
    "artefacts group: the presses read the files of tests/golden/artefacts (tools/golden/make_artefacts_golden.py) "
    "instead of downloading them; the method configs name the same files relative to the repository root",
    "qfilter: synthetic filters (seeded torch.randn in kvpress's QFilters module), loaded with "
    "QFilters.from_pretrained from the local directory",
    "expected_attention_stats: statistics computed by kvpress's collect_queries on the tiny llama (f32, and bf16 "
    "stored as BF16) over seeded random-id calibration sequences, loaded with stats_folder; one file serves every "
    "tiny model (identical shapes)",
    "duo_attention: compression = head_compression_ratio; pattern variant: head scores of "
    "duo_pattern_llama_f32.tsv (kvpress's duo_attention_on_the_fly on the calibration sequences) with sink 8 / "
    "recent 32, and with kvpress's on-the-fly sizes 128 / 256 (>= L: every head keeps everything); on_the_fly "
    "variant: kvpress's duo_attention_on_the_fly on the prefill's own ids (one sample), sink/recent overridden to "
    "8 / 32 after kvpress's post_init; kept = complement of masked_key_indices",
    "duo_attention boundary_tie: equal head scores straddle the n_pruned boundary (numpy argsort picks among them)",
]


def _path(relative: str) -> str:
    return str(REPO / relative)


# ----------------------------------------------------------------------------------------------------------------
# Presses with local artefacts.

def qfilter_press(cr):
    press = QFilterPress(compression_ratio=cr)
    press.load_q_filters = lambda model_name: QFilters.from_pretrained(_path(QFILTER_DIR)).q_filters
    return press


def stats_press(cr, dtype_name, **kwargs):
    return ExpectedAttentionStatsPress(compression_ratio=cr, stats_folder=_path(STATS_DIRS[dtype_name]), **kwargs)


def load_pattern(relative: str):
    """kvpress's load_attention_pattern reads the downloaded TSV this way (np.loadtxt, tab, clip to [0, 1])."""
    return np.clip(np.loadtxt(_path(relative), dtype=float, delimiter="\t"), 0, 1)


def duo_pattern_press(cr, sink, recent):
    press = DuoAttentionPress(head_compression_ratio=cr)

    def load_attention_pattern(model):
        press._head_scores = load_pattern(DUO_PATTERN)
        return sink, recent, press._head_scores

    press.load_attention_pattern = load_attention_pattern
    return press


_current_ids: list[int] = []


class _PromptTokenizer:
    """duo_attention_on_the_fly's tokenizer: the 'text' is the prefill's ids."""

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        return cls()

    def __call__(self, text, return_tensors="pt"):
        assert text == "prompt"
        return BatchEncoding({"input_ids": torch.tensor([_current_ids], dtype=torch.long)})


class _PromptDataset:
    def to_pandas(self):
        return pd.DataFrame({"chapter": ["prompt"]})


def duo_on_the_fly_press(cr, sink, recent):
    press = DuoAttentionPress(head_compression_ratio=cr, on_the_fly_scoring=True)
    original = press.post_init_from_model

    def post_init_from_model(model):
        on_the_fly = duo_module.duo_attention_on_the_fly
        saved = duo_module.load_dataset, duo_module.AutoTokenizer, on_the_fly

        def one_sample(model):
            press._head_scores = on_the_fly(model, num_samples=1, q_len=500)
            return press._head_scores

        duo_module.load_dataset = lambda *a, **k: _PromptDataset()
        duo_module.AutoTokenizer = _PromptTokenizer
        duo_module.duo_attention_on_the_fly = one_sample
        duo_module.cache.clear()
        try:
            original(model)
        finally:
            duo_module.load_dataset, duo_module.AutoTokenizer, duo_module.duo_attention_on_the_fly = saved
            duo_module.cache.clear()
        assert (press.sink_size, press.recent_size) == (128, 256)
        press.sink_size, press.recent_size = sink, recent

    press.post_init_from_model = post_init_from_model
    return press


def run_press(model, attn, ids, press):
    main = sys.modules["__main__"]
    _current_ids[:] = list(ids)
    keys = main.prefill(model, attn, ids, press)[0]
    # The loaded artefacts are dataclass fields; keep them out of the case's "kvpress" description.
    if isinstance(press, QFilterPress):
        press.q_filters = None
    elif isinstance(press, ExpectedAttentionStatsPress):
        press.mu = press.cov = None
    elif isinstance(press, DuoAttentionPress):
        press._streaming_mask = press.streaming_mask.clone()
        press.streaming_mask = None
    return keys


# ----------------------------------------------------------------------------------------------------------------
# DuoAttention's own checks (kind "duo").

def install_recorders(press, log):
    return isinstance(press, DuoAttentionPress)  # nothing to record: the head scores are kept on the press


def _duo_counts(press, length, cr):
    scores = np.asarray(press._head_scores, dtype=float)
    n_pruned = round(scores.size * cr)
    return scores, n_pruned


def check_budget(label, kind, press, kept, length, cr, where):
    if kind != "duo":
        return False
    scores, n_pruned = _duo_counts(press, length, cr)
    full = list(range(length))
    sink, recent = press.sink_size, press.recent_size
    pattern = full if sink >= length - recent else list(range(sink)) + list(range(length - recent, length))
    mask = press._streaming_mask.cpu().numpy()
    assert int(mask.sum()) == n_pruned, f"{where}: {int(mask.sum())} streaming heads, round(size*cr) = {n_pruned}"
    for layer, per_head in enumerate(kept):
        for head, positions in enumerate(per_head):
            want = pattern if mask[layer, head] else full
            assert positions == want, f"{where}: layer {layer} head {head} kept set is not the duo pattern"
    return True


def boundary_tie(kind, press, log, kept, cr):
    if kind != "duo":
        return None
    scores, n_pruned = _duo_counts(press, len(kept[0][0]), cr)
    ordered = np.sort(scores, axis=None)
    return bool(0 < n_pruned < ordered.size and ordered[n_pruned - 1] == ordered[n_pruned])


def check_against_scores(kind, log, kept, tie, where):
    return kind == "duo"  # check_budget compared the kept sets with kvpress's streaming mask


# ----------------------------------------------------------------------------------------------------------------

def plain(method_id, variant=None, **params):
    return {"id": method_id, "variant": variant, "params": params, "scorer": None}


def stats_method(dtype_name, use_covariance=True, use_vnorm=True):
    return plain("expected_attention_stats", statistics=f"{STATS_DIRS[dtype_name]}/model.safetensors",
                 n_future_positions=512, n_sink=4, use_covariance=use_covariance, use_vnorm=use_vnorm, epsilon=0.0)


def press_table():
    """(label, registry, factory(cr), method, attn, kind) as the main script's press_table()."""
    return [
        ("qfilter", None, qfilter_press, plain("qfilter", filters=f"{QFILTER_DIR}/model.safetensors"), "sdpa",
         "scorer"),
        ("expected_attention_stats", None, lambda cr: stats_press(cr, "f32"), stats_method("f32"), "sdpa", "scorer"),
        ("expected_attention_stats(bf16 statistics)", None, lambda cr: stats_press(cr, "bf16"), stats_method("bf16"),
         "sdpa", "scorer"),
        ("expected_attention_stats(use_covariance=false)", None,
         lambda cr: stats_press(cr, "f32", use_covariance=False),
         stats_method("f32", use_covariance=False), "sdpa", "scorer"),
        (f"duo_attention(sink={DUO_SINK},recent={DUO_RECENT})", None,
         lambda cr: duo_pattern_press(cr, DUO_SINK, DUO_RECENT),
         plain("duo_attention", "pattern", pattern=DUO_PATTERN, sink_size=DUO_SINK, recent_size=DUO_RECENT), "sdpa",
         "duo"),
        ("duo_attention(sink=128,recent=256)", None, lambda cr: duo_pattern_press(cr, 128, 256),
         plain("duo_attention", "pattern", pattern=DUO_PATTERN, sink_size=128, recent_size=256), "sdpa", "duo"),
        (f"duo_attention(on_the_fly,sink={DUO_SINK},recent={DUO_RECENT})", None,
         lambda cr: duo_on_the_fly_press(cr, DUO_SINK, DUO_RECENT),
         plain("duo_attention", "on_the_fly", sink_size=DUO_SINK, recent_size=DUO_RECENT), "sdpa", "duo"),
    ]
