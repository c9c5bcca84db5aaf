#!/usr/bin/env python3
"""kvpress decode-time compression golden: DecodingPress / PrefillDecodingPress on the tiny models.

Not a press group of make_kvpress_golden.py (its cases are one-shot prefill kept sets); a script of its own that
writes tests/golden/kvpress/kept_decoding.json, read by tests/methods/kvpress_decoding_parity_test.cpp:
  {"generator", "seed", "versions", "torch_threads", "sdpa_kernel", "notes",
   "prompts": [{"id", "model", "ids"}],
   "cases": [{"model", "dtype", "prompt", "press", "kvpress", "prefill_method": null | {catalog config},
              "prefill_compression", "decoding_method": {catalog config}, "compression_interval", "target_size",
              "hidden_states_buffer_size", "max_new_tokens", "ids": [greedy ids],
              "prefill_kept": null | [[[pos...] per KV head] per layer],
              "prefill_tie": bool, "events": [{"decode_step", "k_len": [per layer], "tie": bool,
              "kept": [[[pos...] per KV head] per layer]}], "boundary_tie": bool (any tie of the case)}]}

How it runs (the same steps as kvaudit's unit runner + runners/unit/decoding_compression.h, not kvpress's
pipeline): under `with press(model):` the whole prompt is prefilled in one forward (DecodingPress does nothing
while prefilling; PrefillDecodingPress applies its prefilling press), the first token is the argmax of the last
prompt logits, then every further token is one forward of the previous token at position_ids = next original
position (evicted tokens still advance it), max_new_tokens tokens in all, no stop token. kvpress's pipeline differs
only in feeding the question as a separate forward, which DecodingPress counts as a decode step and buffers.
Kept positions: the base presses' compress() is wrapped on the instance; each call's output key rows are matched
(exact bytes) to its input rows, and the positions of the cache's rows are tracked in cache order (kvpress gathers
kept rows in top-k order, so the order is tracked too). An event's kept[l][h] is sorted ascending. decode_step
counts decode forwards (1-based); an event is recorded each time DecodingPress reached its interval, also when
k_len <= target_size (nothing evicted then). boundary_tie: some compression's scores (captured from score()) are
equal across the n_kept cut (per event "tie", the prefill's "prefill_tie"; after a tie a reimplementation may
legitimately keep another set, and everything after it may differ). Each case runs twice and must give identical results.

position_order: kvpress gathers the kept rows in top-k (score) order; kvaudit's cache stays in position order. The
set of keys attended is the same, but attention sums them in another order, which in bf16 can change a rounding and,
steps later, a kept set or an id. Each case is therefore also run with kvpress's compressed cache re-sorted into
position order after every compression (only the order changes); where that changes ids or events, they are
recorded under position_order (null otherwise).

Rerun: tools/.venv-kvpress/bin/python tools/golden/kvpress_groups/decoding.py   (a few seconds on one core)
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import DynamicCache

from kvpress import DecodingPress, KnormPress, PrefillDecodingPress, SnapKVPress, TOVAPress
from kvpress.utils import compute_n_kept

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from make_kvpress_golden import attention_context, load, match_rows  # noqa: E402

SEED = 20261202
VOCAB_LOW, VOCAB_HIGH = 3, 300
PROMPT_LENGTH = 40
MAX_NEW_TOKENS = 20
INTERVAL = 4
TARGET = 24
PREFILL_CR = 0.5
PREFILL_WINDOW = 8
# SnapKV in decoding asserts more buffered rows than its window; a compression sees INTERVAL rows here. With
# window > 1 the buffered queries' RoPE positions matter (kvpress rotates them all at the current step's position).
DECODING_WINDOW = 3
MODELS = (("llama", "f32"), ("llama", "bf16"), ("qwen2", "f32"))
REPO = Path(__file__).resolve().parents[3]
OUT = REPO / "tests" / "golden" / "kvpress" / "kept_decoding.json"


def plain(method_id, variant=None, **params):
    return {"id": method_id, "variant": variant, "params": params, "scorer": None}


def run_facts() -> dict:
    """The document's versions, torch threads and sdpa kernel (shared with cam.py)."""
    return {"versions": {"kvpress": importlib.metadata.version("kvpress"), "torch": torch.__version__,
                         "transformers": transformers.__version__, "python": platform.python_version(),
                         "numpy": np.__version__},
            "torch_threads": torch.get_num_threads(),
            "sdpa_kernel": "torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION])"}


def write_document(out: Path, doc: dict) -> None:
    """Compact JSON, one case a line (shared with cam.py)."""
    text = json.dumps(doc, separators=(",", ":")) + "\n"
    text = text.replace(',{"model":', ',\n{"model":')
    out.write_text(text)
    print(f"wrote {out}: {len(doc['cases'])} cases, {len(text)} bytes", file=sys.stderr)


def press_table():
    """(label, factory() -> (press, base press, prefill press or None), decoding method, prefill method)."""
    def decoding(base):
        return DecodingPress(base_press=base, compression_interval=INTERVAL, target_size=TARGET)

    def knorm():
        base = KnormPress()
        return decoding(base), base, None

    def tova():
        base = TOVAPress()
        return decoding(base), base, None

    def snapkv_decoding():
        base = SnapKVPress(window_size=DECODING_WINDOW)
        return decoding(base), base, None

    def prefill_snapkv_then_knorm():
        base = KnormPress()
        prefill = SnapKVPress(compression_ratio=PREFILL_CR, window_size=PREFILL_WINDOW)
        return PrefillDecodingPress(prefilling_press=prefill, decoding_press=decoding(base)), base, prefill

    snapkv = {"id": "snapkv", "variant": "kvpress",
              "params": {"window": PREFILL_WINDOW, "kernel_size": 5, "pooling": "avg"}, "scorer": None}
    return [
        ("decoding(knorm)", knorm, plain("knorm"), None),
        ("decoding(tova)", tova, plain("tova", "kvpress"), None),
        (f"decoding(snapkv(window={DECODING_WINDOW}))", snapkv_decoding,
         {"id": "snapkv", "variant": "kvpress", "params": {"window": DECODING_WINDOW, "kernel_size": 5,
                                                            "pooling": "avg"}, "scorer": None}, None),
        (f"prefill_decoding(snapkv(window={PREFILL_WINDOW}),decoding(knorm))", prefill_snapkv_then_knorm,
         plain("knorm"), snapkv),
    ]


def wrap(press, role: str, log: list, position_order: bool = False):
    """Records every compress() call of `press`: input keys, output keys, its scores (for the tie flag).
    position_order: re-sorts the compressed cache into ascending position order (kvaudit's cache order)."""
    original_compress = type(press).compress
    original_score = type(press).score
    last_scores = {}

    def score(module, hidden_states, keys, values, attentions, kwargs):
        s = original_score(press, module, hidden_states, keys, values, attentions, kwargs)
        last_scores["s"] = s.clone()
        return s

    def compress(module, hidden_states, keys, values, attentions, kwargs):
        last_scores.pop("s", None)
        out_k, out_v = original_compress(press, module, hidden_states, keys, values, attentions, kwargs)
        if position_order and out_k.shape[2] != keys.shape[2]:
            # The input is in position order (by induction), so sorting the matched input rows restores it.
            order = []
            for h in range(out_k.shape[1]):
                rows = match_rows(keys[0, h], out_k[0, h], "position order")
                order.append(sorted(range(len(rows)), key=lambda i: rows[i]))
            index = torch.tensor(order).unsqueeze(0).unsqueeze(-1).expand(-1, -1, -1, out_k.shape[-1])
            out_k, out_v = out_k.gather(2, index), out_v.gather(2, index)
        n_kept = compute_n_kept(keys.shape[2], press.compression_ratio) if press.compression_ratio else None
        log.append({"role": role, "layer": module.layer_idx, "in": keys[0].clone(), "out": out_k[0].clone(),
                    "scores": last_scores.get("s"), "n_kept": n_kept})
        return out_k, out_v

    press.score = score
    press.compress = compress


def tie_at_cut(scores: torch.Tensor, n_kept: int) -> bool:
    s = scores[0].float()
    for head in s:
        ordered = head.sort(descending=True).values
        if n_kept < ordered.numel() and ordered[n_kept - 1] == ordered[n_kept]:
            return True
    return False


def apply(positions, entry, where):
    """positions[h]: cache-order positions of one layer; returns them after the logged compress."""
    out = []
    for h in range(entry["in"].shape[0]):
        assert len(positions[h]) == entry["in"].shape[1], f"{where}: tracked length differs from the cache"
        rows = match_rows(entry["in"][h], entry["out"][h], f"{where} head {h}")
        out.append([positions[h][i] for i in rows])
    return out


@torch.no_grad()
def run_case(model, ids, factory, where, position_order=False):
    press, base, prefill_press = factory()
    log = []
    wrap(base, "decoding", log, position_order)
    if prefill_press is not None:
        wrap(prefill_press, "prefill", log, position_order)
    n_layers = model.config.num_hidden_layers
    hkv = model.config.num_key_value_heads
    cache = DynamicCache()
    generated, events, prefill_kept = [], [], None
    with attention_context("sdpa"), press(model):
        out = model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
        positions = [[list(range(len(ids))) for _ in range(hkv)] for _ in range(n_layers)]
        tie = prefill_tie = False
        for entry in log:
            assert entry["role"] == "prefill", f"{where}: a decoding compression ran during the prefill"
            positions[entry["layer"]] = apply(positions[entry["layer"]], entry, f"{where} prefill")
            prefill_tie |= entry["scores"] is not None and tie_at_cut(entry["scores"], entry["n_kept"])
        tie = prefill_tie
        if prefill_press is not None:
            prefill_kept = [[sorted(p) for p in layer] for layer in positions]
        log.clear()
        generated.append(int(out.logits[0, -1].argmax()))
        next_position = len(ids)
        for step in range(1, MAX_NEW_TOKENS):
            out = model(input_ids=torch.tensor([[generated[-1]]]), past_key_values=cache,
                        position_ids=torch.tensor([[next_position]]), use_cache=True)
            for layer in positions:
                for p in layer:
                    p.append(next_position)
            next_position += 1
            if log:
                assert len(log) == n_layers and [e["layer"] for e in log] == list(range(n_layers)), \
                    f"{where}: step {step} compressed only some layers"
                k_len, event_tie = [], False
                for entry in log:
                    assert entry["role"] == "decoding"
                    k_len.append(entry["in"].shape[1])
                    positions[entry["layer"]] = apply(positions[entry["layer"]], entry, f"{where} step {step}")
                    event_tie |= entry["scores"] is not None and tie_at_cut(entry["scores"], entry["n_kept"])
                tie |= event_tie
                events.append({"decode_step": step, "k_len": k_len, "tie": event_tie,
                               "kept": [[sorted(p) for p in layer] for layer in positions]})
                log.clear()
            generated.append(int(out.logits[0, -1].argmax()))
    for layer, layer_positions in enumerate(positions):
        for h, p in enumerate(layer_positions):
            assert len(p) == cache.layers[layer].keys.shape[2], f"{where}: layer {layer} head {h} length"
    return generated, prefill_kept, prefill_tie, events, tie


def main() -> int:
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(SEED)
    prompts, cases = [], []
    for model_name, dtype_name in MODELS:
        prompt = {"id": f"{model_name}-{dtype_name}-p0", "model": model_name,
                  "ids": [int(x) for x in rng.integers(VOCAB_LOW, VOCAB_HIGH, PROMPT_LENGTH)]}
        prompts.append(prompt)
        model = load(model_name, dtype_name, "sdpa")
        for label, factory, decoding_method, prefill_method in press_table():
            where = f"{prompt['id']} {label}"
            runs = [run_case(model, prompt["ids"], factory, where) for _ in range(2)]
            assert runs[0] == runs[1], f"{where}: two runs differ"
            generated, prefill_kept, prefill_tie, events, tie = runs[0]
            # The same with kvpress's compressed cache kept in position order (kvaudit's order): recorded only
            # where it changes the outcome (the order changes attention's summation order, visible in bf16).
            ordered = run_case(model, prompt["ids"], factory, where, position_order=True)
            position_order = None
            if (ordered[0], ordered[3]) != (generated, events):
                position_order = {"ids": ordered[0], "events": ordered[3], "boundary_tie": ordered[4]}
            for event in events:
                for layer, k in zip(event["kept"], event["k_len"]):
                    for head in layer:
                        assert len(head) == (k if k <= TARGET else TARGET), f"{where}: kept count"
            cases.append({"model": model_name, "dtype": dtype_name, "prompt": prompt["id"], "press": label,
                          "kvpress": repr(factory()[0]), "prefill_method": prefill_method,
                          "prefill_compression": PREFILL_CR if prefill_method else 0.0,
                          "decoding_method": decoding_method, "compression_interval": INTERVAL,
                          "target_size": TARGET, "hidden_states_buffer_size": 256,
                          "max_new_tokens": MAX_NEW_TOKENS, "ids": generated, "prefill_kept": prefill_kept,
                          "prefill_tie": prefill_tie,
                          "events": events, "boundary_tie": tie, "position_order": position_order})
            print(f"{where}: {len(events)} events, tie={tie}, position order changes it: "
                  f"{position_order is not None}", file=sys.stderr)
    doc = {
        "generator": "tools/golden/kvpress_groups/decoding.py",
        "seed": SEED,
        **run_facts(),
        "notes": [
            "one prefill of the whole prompt under the press, then one forward per generated token at the next "
            "original position; no stop token (see the script's docstring for how this relates to kvpress's "
            "pipeline)",
            "events: every time DecodingPress reached compression_interval; kept[l][h] ascending original "
            "positions after it; k_len[l] the cache length it compressed (<= target_size: nothing evicted)",
            "position_order: the same case with kvpress's compressed cache re-sorted into position order after "
            "every compression (kvaudit's order), recorded only where it changes ids or events",
        ],
        "prompts": prompts,
        "cases": cases,
    }
    write_document(OUT, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
