"""Press group queries: NonCausalAttnPress, LeverageScorePress, CompactorPress, CapPress (kvpress 0.5.5)
-> tests/golden/kvpress/kept_queries.json, plus the Gaussian sketches kvpress drew -> tests/golden/kvpress/
sketches_queries.json.

Run from the repository root: tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py --group queries
(see that script's docstring for the document shape and the group hooks). C++ side: methods/non_causal_attention.h,
methods/leverage.h, methods/compactor.h, methods/cap.h; parity test tests/methods/kvpress_parity_test.cpp.

These presses read every query row of the prefill (kvpress's get_prerope_query_states) and, for leverage, the
pre-RoPE keys (get_prerope_key_states): the C++ side reads LayerCapture::queries / queries_prerope / keys_prerope.

Cases (L = 128 query-agnostic, 144 query-aware; every model/dtype/protocol of the main script, cr 0.25/0.5/0.75/0.9):
  non_causal_attention: chunk_size 256 (the default: one zero-padded chunk, L < 256) and 32 (L = 128: four full
    chunks; L = 144: a padded fifth chunk of 16 positions).
  leverage: sketch_dimension 48 (the default; k = 48 > d = 16 here, so the Gram matrix is singular and kvpress's
    1e-2 jitter is what makes it definite).
  compactor: the defaults (blending = cr, chunk 256), chunk_size 32 (slices of 116 / 132 positions: a padded last
    chunk both ways) and blending 0.35 fixed (catalog variant fixed_blending).
  cap: the defaults (tau 5, n_future_positions 512, n_sink 4, epsilon 1e-6) and tau 1 with 64 future positions.

The sketches: LeverageScorePress (also inside CompactorPress) draws its sketch with torch.randn from torch's global
RNG. During each prefill run_press() below replaces torch.randn: the n-th call of a prefill (layer n) returns the
tensor torch.randn drew, once, from torch.Generator().manual_seed(SKETCH_SEED + n) in the requested dtype and shape,
so every case of a dtype uses the same sketch per layer (and both runs of a case agree). The scaled sketch
raw * (1/sqrt(k)), computed with torch exactly as the press does, is written to sketches_queries.json, and the C++
parity test injects it into our scorer (methods/compactor.h make_method_with_sketch). kvpress's own draws (from
the unseeded global RNG) cannot be reproduced by any other program; our method draws from Philox keyed by the cell.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch
from kvpress import CapPress, CompactorPress, LeverageScorePress, NonCausalAttnPress

SKETCH_SEED = 20251202
SKETCH_FILE = Path(__file__).resolve().parents[3] / "tests" / "golden" / "kvpress" / "sketches_queries.json"

NOTES = [
    "queries group: non_causal_attention, leverage, compactor and cap read every query row (pre- or post-RoPE) and "
    "leverage the pre-RoPE keys; the C++ capture provides them only when a method asks (Method::needs_all_queries)",
    "leverage and compactor: torch.randn is replaced during each prefill by the draws recorded in "
    "tests/golden/kvpress/sketches_queries.json (one per dtype, shape and layer, drawn by torch.randn from "
    f"seed {SKETCH_SEED} + layer); the C++ parity test injects exactly those sketches, since kvpress's own "
    "global-RNG draws cannot be reproduced",
    "compactor protects its sinks with the layer max itself (not max + 1): the best middle token ties with the "
    "sinks, which the boundary-tie rule flags only when the budget boundary falls there",
    "non_causal_attention with the default chunk 256 pads the single chunk (L < 256): padded query rows add about "
    "1/256 to every column, as kvpress computes",
    "queries group boundary ties: leverage scores of layer 0 depend on the token alone (pre-RoPE keys), so repeated "
    "tokens tie exactly; compactor's sinks tie with its best middle token",
    "queries group bf16: the C++ parity runs on its own CpuModel, whose bf16 pre-RoPE keys differ from HF's by one "
    "bf16 step in about a tenth of layer 0's entries; leverage (ridge leverage of the sketched keys) is the most "
    "sensitive to that (untied mean about 0.98), the others stay above 0.99",
]

_sketches: dict = {}  # (dtype name, shape) -> list of per-layer raw draws


def _dtype_name(dtype) -> str:
    return {torch.float32: "f32", torch.bfloat16: "bf16"}[dtype]


def _write_sketches():
    entries = []
    for (dtype, shape), layers in sorted(_sketches.items()):
        k = shape[-1]
        scaled = [(raw * (1 / math.sqrt(k))).float().reshape(-1).tolist() for raw in layers]
        entries.append({"dtype": dtype, "shape": list(shape[1:]), "layers": scaled})
    doc = {"generator": "tools/golden/make_kvpress_golden.py --group queries",
           "note": "Gaussian sketches of LeverageScorePress (also inside CompactorPress): per dtype and shape "
                   "[Hkv, d, k], per layer, the sketch kvpress used, raw * (1/sqrt(k)) in the dtype, row-major; "
                   f"raw = torch.randn(1, Hkv, d, k, dtype, generator=manual_seed({SKETCH_SEED} + layer))",
           "seed": SKETCH_SEED, "sketches": entries}
    SKETCH_FILE.write_text(json.dumps(doc, separators=(",", ":")) + "\n")


class _RecordedRandn:
    """torch.randn during one prefill: the n-th call returns the recorded draw of layer n."""

    def __init__(self, original):
        self.original, self.calls = original, 0

    def __call__(self, *size, generator=None, dtype=None, device=None, **kwargs):
        assert generator is None and not kwargs, "unexpected torch.randn call in a press"
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else size
        dtype = dtype or torch.get_default_dtype()
        key = (_dtype_name(dtype), tuple(int(s) for s in shape))
        layers = _sketches.setdefault(key, [])
        layer = self.calls
        self.calls += 1
        if layer == len(layers):
            draw_generator = torch.Generator().manual_seed(SKETCH_SEED + layer)
            layers.append(self.original(*key[1], generator=draw_generator, dtype=dtype))
            _write_sketches()
        return layers[layer].clone().to(device=device)


def run_press(model, attn, ids, press):
    main = sys.modules["__main__"]
    recorded = _RecordedRandn(torch.randn)
    torch.randn = recorded
    try:
        keys = main.prefill(model, attn, ids, press)[0]
    finally:
        torch.randn = recorded.original
    if isinstance(press, (LeverageScorePress, CompactorPress)):
        assert recorded.calls == len(keys), f"{recorded.calls} sketch draws for {len(keys)} layers"
    else:
        assert recorded.calls == 0
    return keys


def plain(method_id, variant=None, **params):
    return {"id": method_id, "variant": variant, "params": params, "scorer": None}


def compactor_method(variant="kvpress", chunk_size=256, blending=0.35):
    return plain("compactor", variant, sink_size_start=8, sink_size_end=4, chunk_size=chunk_size,
                 sketch_dimension=48, blending=blending)


def press_table():
    """(label, registry, factory(cr), method, attn, kind) as the main script's press_table()."""
    return [
        ("non_causal_attention", None, lambda cr: NonCausalAttnPress(compression_ratio=cr),
         plain("non_causal_attention", chunk_size=256), "sdpa", "scorer"),
        ("non_causal_attention(chunk_size=32)", None,
         lambda cr: NonCausalAttnPress(compression_ratio=cr, chunk_size=32),
         plain("non_causal_attention", chunk_size=32), "sdpa", "scorer"),
        ("leverage", None, lambda cr: LeverageScorePress(compression_ratio=cr),
         plain("leverage", sketch_dimension=48), "sdpa", "scorer"),
        ("compactor", None, lambda cr: CompactorPress(compression_ratio=cr), compactor_method(), "sdpa", "scorer"),
        ("compactor(chunk_size=32)", None, lambda cr: CompactorPress(compression_ratio=cr, chunk_size=32),
         compactor_method(chunk_size=32), "sdpa", "scorer"),
        ("compactor(blending=0.35)", None, lambda cr: CompactorPress(compression_ratio=cr, blending=0.35),
         compactor_method(variant="fixed_blending"), "sdpa", "scorer"),
        ("cap", None, lambda cr: CapPress(compression_ratio=cr),
         plain("cap", tau=5.0, n_future_positions=512, n_sink=4, epsilon=1e-6), "sdpa", "scorer"),
        ("cap(tau=1,n_future_positions=64)", None,
         lambda cr: CapPress(compression_ratio=cr, tau=1.0, n_future_positions=64),
         plain("cap", tau=1.0, n_future_positions=64, n_sink=4, epsilon=1e-6), "sdpa", "scorer"),
    ]
