"""Press group kvgrad: KVgradPress (kvpress 0.5.5; KVzip's reconstruction pass + input x gradient attribution)
-> tests/golden/kvpress/kept_kvgrad.json.

Run from the repository root: tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group kvgrad
(see that script's docstring for the document shape and the group hooks). C++ side: methods/kvgrad.h (the method),
runners/cpu/attention_output_gradients.h (the backward pass), methods/extra_pass.h; parity test
tests/methods/kvpress_parity_test.cpp, gradient check tests/methods/kvgrad_test.cpp.

KVgradPress is a KVzipPress: the same stand-in tokenizer as group kvzip (kvpress_groups/kvzip.py, whose
module-level patch of kvzip_press.AutoTokenizer also serves KVgradPress), the same pass_prompt note, the same
masking and budget rules; its hooks are reused from that module. Besides the kept sets, the cases of the plain
press at compression 0.5 record the gradient norms ||dPhi/da_p^l|| of the first reconstruction chunk (one list
of floats per layer, over the chunk's rows), captured from the attention outputs' .grad inside kvpress's own
_update_scores, which the C++ backward is checked against.
"""

from __future__ import annotations

import logging

import kvpress.presses.kvgrad_press as kvgrad_module
from kvpress.presses.kvgrad_press import KVgradPress

from kvpress_groups import kvzip as kvzip_group

CHUNK_SMALL = kvzip_group.CHUNK_SMALL  # 3 reconstruction chunks (the default 512 takes one at L <= 144)
MASKED_KINDS = kvzip_group.MASKED_KINDS
boundary_tie = kvzip_group.boundary_tie
check_budget = kvzip_group.check_budget
check_against_scores = kvzip_group.check_against_scores

# KVgradPress warns about its extra passes on every construction.
logging.getLogger(kvgrad_module.__name__).setLevel(logging.ERROR)

NOTES = [note for note in kvzip_group.NOTES if not note.startswith("kvzip(chunk_size")] + [
    "kvgrad: KVgradPress(compression_ratio, layerwise, n_sink=4, chunk_size=512 or 48); scores = max over the "
    "chunk rows and the group's query heads of A * ||v W_O|| * ||dPhi/da||, Phi = sum of the squared last "
    "hidden states of the chunk; kept sets and ties as group kvzip",
    "kvgrad gradient_norms: cases of press 'kvgrad' at compression 0.5 carry the first chunk's "
    "||dPhi/da_p^l|| (attention_output.grad.float().norm(dim=-1) in kvpress's _update_scores), per layer",
    "kvgrad bf16: kvpress back-propagates in bf16; the C++ backward runs in f32, so bf16 gradient norms and "
    "near-tied scores may differ; f32 cases are matched",
]


def install_recorders(press, log):
    if not isinstance(press, KVgradPress):
        return False
    kvzip_group.install_recorders(press, log)
    press._golden_gradient_norms = None
    original = type(press)._update_scores

    def update_scores(model, cache, layer_idx, captures):
        if press.start_idx == press.prefix_length:  # the first chunk
            if press._golden_gradient_norms is None:
                press._golden_gradient_norms = {}
            grad = captures["attention_outputs"][layer_idx].grad
            press._golden_gradient_norms[layer_idx] = grad.detach().float().norm(dim=-1)[0].tolist()
        original(press, model, cache, layer_idx, captures)

    press._update_scores = update_scores
    return True


def case_extra(label, kind, press):
    if label != "kvgrad" or press.compression_ratio != 0.5 or press._golden_gradient_norms is None:
        return {}
    norms = press._golden_gradient_norms
    return {"gradient_norms": [norms[layer] for layer in sorted(norms)]}


def kvgrad_method(layerwise=False, chunk_size=512):
    return {"id": "kvgrad", "variant": None,
            "params": {"layerwise": layerwise, "n_sink": 4, "chunk_size": chunk_size}, "scorer": None}


def press_table():
    """(label, registry, factory(cr), method, attn, kind) as the main script's press_table()."""
    return [
        ("kvgrad", None, lambda cr: KVgradPress(compression_ratio=cr), kvgrad_method(), "sdpa", "kvzip"),
        ("kvgrad(layerwise=True)", None, lambda cr: KVgradPress(compression_ratio=cr, layerwise=True),
         kvgrad_method(layerwise=True), "sdpa", "kvzip"),
        (f"kvgrad(chunk_size={CHUNK_SMALL})", None,
         lambda cr: KVgradPress(compression_ratio=cr, chunk_size=CHUNK_SMALL),
         kvgrad_method(chunk_size=CHUNK_SMALL), "sdpa", "kvzip"),
    ]
