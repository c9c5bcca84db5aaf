#!/usr/bin/env python3
"""kvpress DMSPress(decoding=True) golden: threshold eviction of every entry as it leaves the sliding window, on
the tiny models; writes tests/golden/kvpress/kept_decoding_dms.json, read by
tests/methods/kvpress_decoding_dms_parity_test.cpp (C++ side: runners/unit/dms_decoding.h, methods/dms.h).

Document: {"generator", "seed", "versions", "torch_threads", "sdpa_kernel", "notes",
  "prompts": [{"id", "model", "ids", "context_length"}],
  "cases": [{"model", "dtype", "prompt", "press", "kvpress", "method": {catalog config of dms, decoding = true},
             "threshold", "sliding_window_size", "max_new_tokens", "ids": [greedy ids],
             "forwards": [{"forward": 0 (prefill) | 1 (rest) | 2.. (decode steps), "length": cache length after it,
                           "evicted": [[[positions newly masked by it, ascending] per KV head] per layer],
                           "near_threshold": bool}],
             "kept": [[[final kept positions] per KV head] per layer], "boundary_tie": bool}]}

How it runs (kvaudit's unit runner's steps, not kvpress's pipeline): under `with press(model):` the prompt's first
context_length tokens are prefilled in one forward (DMSPress's prefill: the wrapped press scores all of them,
positions before the last sliding_window_size ones that score below the threshold are masked, the last
min(L, w) scores stay in the buffer); the rest of the prompt (question + template tail in kvaudit) is one forward of
its q_len tokens (not prefilling: the press scores only those entries and appends them to the buffer; what leaves
the window is judged); the first generated token is the argmax of that forward's last logits; every further token
is one forward of the previous one, max_new_tokens tokens in all, no stop token. kvpress never shortens the cache:
it masks (self_attn.masked_key_indices, a fake key per masked entry rebuilt from each forward's queries), so a cache
index is the original position. "evicted" of a forward = the entries its hook newly masked (they stop being
attended from the next forward on). near_threshold: some entry judged in that forward (scores that left the
window, or the prefill's scored positions) lies within a relative 2^-10 (bf16 model) / 2^-20 (f32) of the
threshold in the scores' dtype, where a runtime whose keys or hidden states differ by a rounding may decide the
other way; boundary_tie = any. Each case runs twice and must give identical results.

Rerun: ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 tools/.venv-kvpress/bin/python tools/golden/kvpress_groups/dms_decoding.py
(seconds on one core; the ISA cap keeps oneDNN off AMX on CPUs that list it, as the other kvpress goldens need)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import DynamicCache

from kvpress import DMSPress, KnormPress, KVzapPress
from kvpress.presses.kvzap_press import KVzapModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_kvpress_golden import attention_context, load  # noqa: E402
from decoding import MODELS, VOCAB_HIGH, VOCAB_LOW, run_facts, write_document  # noqa: E402

SEED = 20261205
PROMPT_LENGTH = 40
CONTEXT_LENGTH = 32  # the rest (8 tokens) is one non-prefilling forward, as kvaudit feeds question + suffix
MAX_NEW_TOKENS = 20
WINDOW = 8
REPO = Path(__file__).resolve().parents[3]
KVZAP_MLP = "tests/golden/artefacts/kvzap_mlp_tiny"
OUT = REPO / "tests" / "golden" / "kvpress" / "kept_decoding_dms.json"
# Thresholds inside each scorer's range on these prompts (Knorm: -||k|| about -6..-3.7; the synthetic KVzap mlp
# surrogate about -0.25..0.37), so that entries are masked at the prefill, after the rest and while decoding.
THRESHOLDS = {"knorm": [-5.0, -4.5], "kvzap": [0.0, 0.15]}


def kvzap_press():
    press = KVzapPress(model_type="mlp")

    def post_init_from_model(model):
        if getattr(press, "kvzap_model", None) is None:
            press.kvzap_model = KVzapModel.from_pretrained(str(REPO / KVZAP_MLP))
            press.kvzap_model_name = KVZAP_MLP

    press.post_init_from_model = post_init_from_model
    return press


def scorer_config(scorer):
    if scorer == "knorm":
        return {"id": "knorm", "variant": None, "params": {}, "scorer": None}
    return {"id": "kvzap", "variant": None, "params": {"model": f"{KVZAP_MLP}/model.safetensors"}, "scorer": None}


def make_press(scorer, threshold):
    inner = KnormPress() if scorer == "knorm" else kvzap_press()
    return DMSPress(press=inner, threshold=threshold, sliding_window_size=WINDOW, decoding=True)


def masked_sets(model, n_heads):
    """Per layer and KV head, the set of masked cache indices."""
    out = []
    for layer in model.model.layers:
        indices = layer.self_attn.masked_key_indices
        heads = [set() for _ in range(n_heads)]
        if indices is not None:
            batch, head, seq = (t.tolist() for t in indices)
            assert set(batch) <= {0}
            for h, s in zip(head, seq):
                assert s not in heads[h], "an entry was masked twice"
                heads[h].add(s)
        out.append(heads)
    return out


@torch.no_grad()
def run_case(model, ids, scorer, threshold, where):
    press = make_press(scorer, threshold)
    n_layers = model.config.num_hidden_layers
    hkv = model.config.num_key_value_heads
    bf16 = model.dtype == torch.bfloat16
    relative = 2.0 ** -10 if bf16 else 2.0 ** -20
    # Scores of every call of the wrapped press, per layer (to flag entries judged near the threshold).
    scored = []
    original_score = press.press.score

    def score(module, hidden_states, keys, values, attentions, kwargs):
        s = original_score(module, hidden_states, keys, values, attentions, kwargs)
        scored.append((module.layer_idx, s[0].clone()))
        return s

    press.press.score = score
    pending = [[] for _ in range(n_layers)]  # per layer: score columns [Hkv] still in the window, oldest first

    def judged_near(layer, columns):
        t = torch.tensor(threshold, dtype=columns[0].dtype).float()
        return any(bool(((c.float() - t).abs() <= abs(float(t)) * relative).any()) for c in columns)

    forwards, generated = [], []
    previous = [[set() for _ in range(hkv)] for _ in range(n_layers)]
    cache = DynamicCache()
    with attention_context("sdpa"), press(model):
        for forward in range(MAX_NEW_TOKENS + 1):
            scored.clear()
            if forward == 0:
                out = model(input_ids=torch.tensor([ids[:CONTEXT_LENGTH]]), past_key_values=cache, use_cache=True)
            elif forward == 1:
                rest = ids[CONTEXT_LENGTH:]
                out = model(input_ids=torch.tensor([rest]), past_key_values=cache,
                            position_ids=torch.arange(CONTEXT_LENGTH, len(ids)).unsqueeze(0), use_cache=True)
            else:
                position = cache.get_seq_length()
                out = model(input_ids=torch.tensor([[generated[-1]]]), past_key_values=cache,
                            position_ids=torch.tensor([[position]]), use_cache=True)
            assert [layer for layer, _ in scored] == list(range(n_layers)), f"{where}: forward {forward} scores"
            near = False
            for layer, s in scored:
                columns = pending[layer] + [s[:, j] for j in range(s.shape[1])]
                leaving = max(0, len(columns) - WINDOW)
                near |= judged_near(layer, columns[:leaving]) if leaving else False
                pending[layer] = columns[leaving:]
            length = cache.get_seq_length()
            masked = masked_sets(model, hkv)
            evicted = [[sorted(masked[layer][h] - previous[layer][h]) for h in range(hkv)]
                       for layer in range(n_layers)]
            for layer in range(n_layers):
                for h in range(hkv):
                    assert previous[layer][h] <= masked[layer][h], f"{where}: an entry was unmasked"
            previous = masked
            forwards.append({"forward": forward, "length": length, "evicted": evicted, "near_threshold": near})
            if forward == 0:
                continue
            generated.append(int(out.logits[0, -1].argmax()))
            if len(generated) == MAX_NEW_TOKENS:
                break
    length = cache.get_seq_length()
    kept = [[sorted(set(range(length)) - previous[layer][h]) for h in range(hkv)] for layer in range(n_layers)]
    return generated, forwards, kept


def check_rule(forwards, where):
    """What kvaudit's reading of DMSPress says: after the prefill only positions < L - w are masked; later forward f
    (q_len new entries) masks only positions that just left the window; the last w positions are never masked."""
    seen = 0
    for f in forwards:
        length = f["length"]
        low, high = (0, length - WINDOW) if f["forward"] == 0 else (max(0, seen - WINDOW), length - WINDOW)
        for layer in f["evicted"]:
            for head in layer:
                assert all(low <= p < high for p in head), f"{where}: forward {f['forward']} masked {head}"
        seen = length


def main() -> int:
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(SEED)
    prompts, cases = [], []
    for model_name, dtype_name in MODELS:
        prompt = {"id": f"{model_name}-{dtype_name}-dms0", "model": model_name,
                  "ids": [int(x) for x in rng.integers(VOCAB_LOW, VOCAB_HIGH, PROMPT_LENGTH)],
                  "context_length": CONTEXT_LENGTH}
        prompts.append(prompt)
        model = load(model_name, dtype_name, "sdpa")
        for scorer, thresholds in THRESHOLDS.items():
            for threshold in thresholds:
                label = f"dms({scorer},threshold={threshold},sliding_window_size={WINDOW},decoding=True)"
                where = f"{prompt['id']} {label}"
                runs = [run_case(model, prompt["ids"], scorer, threshold, where) for _ in range(2)]
                assert runs[0] == runs[1], f"{where}: two runs differ"
                generated, forwards, kept = runs[0]
                check_rule(forwards, where)
                counts = [sum(len(h) for layer in f["evicted"] for h in layer) for f in forwards]
                tie = any(f["near_threshold"] for f in forwards)
                press = make_press(scorer, threshold)
                cases.append({"model": model_name, "dtype": dtype_name, "prompt": prompt["id"], "press": label,
                              "kvpress": f"DMSPress(press={type(press.press).__name__}(), threshold={threshold}, "
                                         f"sliding_window_size={WINDOW}, decoding=True)",
                              "method": {"id": "dms", "variant": None,
                                         "params": {"sliding_window_size": WINDOW, "decoding": True},
                                         "scorer": scorer_config(scorer)},
                              "threshold": threshold, "sliding_window_size": WINDOW,
                              "max_new_tokens": MAX_NEW_TOKENS, "ids": generated, "forwards": forwards,
                              "kept": kept, "boundary_tie": tie})
                print(f"{where}: masked per forward {counts}, tie={tie}", file=sys.stderr)
    doc = {
        "generator": "tools/golden/kvpress_groups/dms_decoding.py",
        "seed": SEED,
        **run_facts(),
        "notes": [
            f"prefill of the first context_length tokens, one forward of the rest ({PROMPT_LENGTH - CONTEXT_LENGTH} "
            "tokens), then one forward per generated token; no stop token (see the script's docstring)",
            "forwards[f].evicted: entries DMSPress newly masked in forward f (cache index = original position: "
            "kvpress masks and never shortens the cache); kept: the final unmasked positions",
            "near_threshold: an entry judged in that forward scored within a relative 2^-10 (bf16) / 2^-20 (f32) "
            "of the threshold",
        ],
        "prompts": prompts,
        "cases": cases,
    }
    write_document(OUT, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
