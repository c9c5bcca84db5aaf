"""Press group restorekv: RestoreKVPress (kvpress 0.5.5 kvpress/presses/restorekv_press.py; KVzip scoring + n
learned restore tokens encoded by one LoRA-adapted forward, budget-matched eviction)
-> tests/golden/kvpress/kept_restorekv.json.

Run from the repository root, after tools/golden/make_restorekv_artefacts.py wrote the artefacts:
  ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 tools/.venv-kvpress/bin/python tools/golden/make_kvpress_golden.py \
      --group restorekv
(see that script's docstring for the document shape and the group hooks; docs/design/restorekv.md for the semantics
the C++ side must reproduce). ONEDNN_MAX_CPU_ISA: on a CPU with AMX, torch's bf16 CPU flash-attention kernel takes
another path and the main script's bit-for-bit check of the bf16 sdpa forward against
tests/golden/tiny_models/reference.safetensors fails (one bf16 step in layer 1's keys); capping oneDNN below AMX
reproduces the reference exactly (f32 is unaffected). On a CPU without AMX the variable changes nothing.

Artefacts: kvpress downloads restore_embeddings.safetensors and a PEFT LoRA adapter from higokri/RestoreKV-<model>
[_plus] (post_init_from_model). Here post_init_from_model is replaced, per press instance, by a local loader doing the
same steps from tests/golden/artefacts/restorekv_tiny_<model> (model = the tiny model's directory name; the plain and
the _plus variant read the same directory): safetensors load_file(...)["restore_embeddings"] cast to the model's
dtype, model.load_adapter(<dir>, adapter_name=press.adapter_name) unless that adapter name is already in
model.peft_config, model.disable_adapters(), and kvpress's "same repository: nothing to do" check.

How a case runs: kvpress's own KVPressTextGenerationPipeline._forward / generate_answer / _remove_answer_from_cache
(called on a shim holding the model and a tokenizer whose decode returns the ids) with the prefill ids as context_ids
and one question: query-agnostic: question_ids + the stand-in chat template's suffix ids (what the pipeline's
preprocess makes of question + question_suffix); query-aware: the suffix ids alone (kvpress's query-aware protocol
puts the question into the context and asks the empty question). The cache is snapshotted just before the first
generation forward: its first L rows must equal the plain prefill's keys (kept = complement of masked_key_indices,
MASKED_KINDS), rows L..L+n-1 are the restore tokens' K/V. The position_ids of every generation forward and the cache
length before it are logged (the pipeline feeds the question at context_length = cache.get_seq_length() = L + n).
Generation runs twice from that snapshot: "ids" with the masked context rows excluded exactly from attention (sdpa
with a boolean mask; what an evicting runtime computes), and "ids_fake_keys" with kvpress's own attention_patch (a
"null key" written into each masked row). kvpress's null-key search (search_hyperplane) fails on these tiny random
models whenever a forward has many queries (the question forward), raising ValueError: then ids_fake_keys is null.
Where it succeeds the two agree (asserted for every such case).

Checks (besides the main script's): every masked index lies in [0, L) (restore rows are never evicted); kept counts
follow KVzip's budget with the effective ratio min(1, cr + n/L) (kvzip_group.check_budget); the restore K/V of every
case equal, bit for bit, a stand-alone recomputation (prefill of the ids with adapters disabled, then one forward of
the embeddings at positions L..L+n-1 with the adapter enabled), so they depend on the prompt, protocol and artefacts
only; with adapters disabled the same forward gives other K/V (the LoRA changes them measurably); two runs of a case
give identical kept sets, ties and generated ids.
"""

from __future__ import annotations

import json
import logging
import sys
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import DynamicCache
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

import kvpress.presses.restorekv_press as restorekv_module
from kvpress import RestoreKVPress
from kvpress.pipeline import KVPressTextGenerationPipeline

from kvpress_groups import kvzip as kvzip_group  # also installs the stand-in tokenizer KVzipPress needs

REPO = Path(__file__).resolve().parents[3]
ARTEFACTS = "tests/golden/artefacts"
MAX_NEW_TOKENS = 8
RECORD_CR = 0.5  # the cases of press "restorekv" at this compression carry the restore K/V
SUFFIX = kvzip_group.PASS_PROMPT["suffix"]  # the stand-in chat template's "</user><bot>"

MASKED_KINDS = {"restorekv"}

logging.getLogger(restorekv_module.__name__).setLevel(logging.ERROR)


def artefact_dir(model) -> str:
    """tests/golden/tiny_models/<model>/<dtype> -> tests/golden/artefacts/restorekv_tiny_<model> (repo-relative)."""
    return f"{ARTEFACTS}/restorekv_tiny_{Path(model.config.name_or_path).parent.name}"


def restorekv_press(cr, **kwargs):
    press = RestoreKVPress(compression_ratio=cr, **kwargs)

    def post_init_from_model(model):
        # kvpress: restore_model_name = f"higokri/RestoreKV-{model_name}{variant}", downloaded from the hub.
        relative = artefact_dir(model)
        variant = "_plus" if press.kvzip_plus_normalization else ""
        restore_model_name = relative + variant  # both variants read `relative` here
        if restore_model_name == press.restore_model_name:
            return
        embeddings = load_file(str(REPO / relative / "restore_embeddings.safetensors"))["restore_embeddings"]
        press.restore_embeddings = embeddings.to(model.device, dtype=model.dtype)
        if press.adapter_name not in getattr(model, "peft_config", {}):
            model.load_adapter(str(REPO / relative), adapter_name=press.adapter_name)
        model.disable_adapters()
        press.restore_model_name = restore_model_name
        press._golden_artefacts = relative

    press.post_init_from_model = post_init_from_model
    return press


# ----------------------------------------------------------------------------------------------------------------
# kvpress's pipeline on a shim (no tokenizer/text: ids in, ids out).

class _IdsTokenizer:
    def decode(self, ids, skip_special_tokens=True):
        return json.dumps([int(i) for i in ids])


def _exact_sdpa(module, query, key, value, attention_mask, dropout, **kwargs):
    """sdpa with the masked keys excluded exactly (boolean mask), instead of kvpress's fake keys."""
    indices = getattr(module, "masked_key_indices", None)
    if query.shape[2] == key.shape[2]:
        module.masked_key_indices = None  # a prefill resets the masks, as in kvpress's attention_patch
    elif indices is not None:
        bsz, heads, q_len, _ = query.shape
        kv_heads, kv_len = key.shape[1], key.shape[2]
        allowed = torch.ones(bsz, kv_heads, kv_len, dtype=torch.bool, device=key.device)
        allowed[indices] = False
        allowed = allowed.repeat_interleave(heads // kv_heads, dim=1)[:, :, None, :].expand(bsz, heads, q_len, kv_len)
        if attention_mask is not None:
            assert attention_mask.dtype == torch.bool
            allowed = allowed & attention_mask[:, :, :, :kv_len]
        elif q_len > 1:
            rows = torch.arange(q_len, device=key.device)[:, None] + (kv_len - q_len)
            allowed = allowed & (torch.arange(kv_len, device=key.device)[None, :] <= rows)
        attention_mask = allowed.contiguous()
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, **kwargs)


@contextmanager
def _exact_masking():
    patched = ALL_ATTENTION_FUNCTIONS["sdpa"]
    ALL_ATTENTION_FUNCTIONS["sdpa"] = _exact_sdpa
    try:
        yield
    finally:
        ALL_ATTENTION_FUNCTIONS["sdpa"] = patched


class _Pipeline:
    """Holds what KVPressTextGenerationPipeline's _forward and generate_answer read (model, tokenizer)."""

    _forward = KVPressTextGenerationPipeline._forward
    _remove_answer_from_cache = KVPressTextGenerationPipeline._remove_answer_from_cache

    def __init__(self, model):
        self.model = model
        self.tokenizer = _IdsTokenizer()
        self.snapshot = None
        self.forwards = []
        self.fake_key_answer = None

    def generate_answer(self, question_ids, cache, context_length, max_new_tokens):
        assert self.snapshot is None, "one question per case"
        self.snapshot = {"keys": [layer.keys.clone() for layer in cache.layers],
                         "values": [layer.values.clone() for layer in cache.layers],
                         "context_length": context_length, "cache_length": cache.get_seq_length()}

        def log_forward(module, args, kwargs):
            self.forwards.append((kwargs["position_ids"][0].tolist(), kwargs["past_key_values"].get_seq_length()))

        # kvpress's generate_answer with the masked keys excluded exactly (the answer _forward returns) ...
        handle = self.model.register_forward_pre_hook(log_forward, with_kwargs=True)
        try:
            with _exact_masking():
                answer = KVPressTextGenerationPipeline.generate_answer(self, question_ids, cache, context_length,
                                                                       max_new_tokens)
        finally:
            handle.remove()
        # ... and with kvpress's own fake-key masking (attention_patch.py), on a copy of the compressed cache.
        copy = DynamicCache()
        for layer, (keys, values) in enumerate(zip(self.snapshot["keys"], self.snapshot["values"])):
            copy.update(keys.clone(), values.clone(), layer)
        try:
            self.fake_key_answer = KVPressTextGenerationPipeline.generate_answer(self, question_ids, copy,
                                                                               context_length, max_new_tokens)
        except ValueError as error:  # search_hyperplane: no fake key nulls every query of the forward
            assert "Could not find fake keys" in str(error)
            self.fake_key_answer = None
        return answer


_prompts = {}      # tuple(prefill ids) -> (protocol, question ids fed to the pipeline)
_restore_kv = {}   # (model path, tuple(ids)) -> {"lora": (keys, values), "no_lora": (keys, values)}
_outcomes = {}     # (model path, tuple(ids), press config) -> generated ids (two runs must agree)


def _question(ids):
    if not _prompts:
        for prompt in sys.modules["__main__"].make_prompts():
            _prompts[tuple(prompt["context_ids"])] = ("query-agnostic", prompt["question_ids"] + SUFFIX)
            _prompts[tuple(prompt["context_ids"] + prompt["question_ids"])] = ("query-aware", list(SUFFIX))
    return _prompts[tuple(ids)]


@torch.no_grad()
def _standalone_restore(model, attn, ids, embeddings, adapter_name, lora):
    """Prefill of ids (adapters disabled), then one forward of the embeddings at positions L..L+n-1."""
    main = sys.modules["__main__"]
    length, n = len(ids), embeddings.shape[0]
    cache = DynamicCache()
    positions = torch.arange(length, length + n)
    with main.attention_context(attn):
        model.model(input_ids=torch.tensor([ids], dtype=torch.long), past_key_values=cache)
        if lora:
            model.set_adapter(adapter_name)
            model.enable_adapters()
        try:
            with torch.inference_mode():
                model.model(inputs_embeds=embeddings.unsqueeze(0), past_key_values=cache,
                            position_ids=positions.unsqueeze(0), cache_position=positions, use_cache=True)
        finally:
            model.disable_adapters()
    return ([layer.keys[0, :, length:].clone() for layer in cache.layers],
            [layer.values[0, :, length:].clone() for layer in cache.layers])


def _equal(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def run_press(model, attn, ids, press):
    main = sys.modules["__main__"]
    assert isinstance(press, RestoreKVPress)
    for module in main.attention_modules(model):
        module.masked_key_indices = None
    protocol, question = _question(ids)
    length = len(ids)
    pipe = _Pipeline(model)
    inputs = {"context_ids": torch.tensor([ids], dtype=torch.long),
              "questions_ids": [torch.tensor([question], dtype=torch.long)]}
    with main.attention_context(attn), torch.no_grad():
        (answer,) = pipe._forward(inputs, max_new_tokens=MAX_NEW_TOKENS, press=press, cache=DynamicCache())
    generated = json.loads(answer)
    fake_keys = None if pipe.fake_key_answer is None else json.loads(pipe.fake_key_answer)
    where = f"{model.config.name_or_path} {protocol} {press!r}"
    assert fake_keys is None or fake_keys == generated, f"{where}: kvpress's null keys generate other ids"

    n = press.num_restore_tokens
    snap = pipe.snapshot
    assert n > 0, where
    assert snap["cache_length"] == length + n and snap["context_length"] == length + n, f"{where}: {snap}"
    # Generation forwards: question at positions L+n.., then one per token; cache row index == position.
    expected_start = length + n
    for step, (positions, cache_length) in enumerate(pipe.forwards):
        first = expected_start if step == 0 else expected_start + len(question) + step - 1
        width = len(question) if step == 0 else 1
        assert positions == list(range(first, first + width)), f"{where}: forward {step} at {positions}"
        assert cache_length == first, f"{where}: forward {step} with a cache of {cache_length}"
    masks = [module.masked_key_indices for module in main.attention_modules(model)]
    for _, _, seq in masks:
        assert int(seq.max()) < length, f"{where}: a restore row was masked"

    keys = [k[0, :, length:length + n] for k in snap["keys"]]
    values = [v[0, :, length:length + n] for v in snap["values"]]
    key = (model.config.name_or_path, tuple(ids))
    if key not in _restore_kv:
        embeddings = press.restore_embeddings
        lora = _standalone_restore(model, attn, ids, embeddings, press.adapter_name, True)
        plain = _standalone_restore(model, attn, ids, embeddings, press.adapter_name, False)
        assert not any(torch.equal(a, b) for a, b in zip(lora[0] + lora[1], plain[0] + plain[1])), \
            f"{where}: the LoRA does not change some layer's restore K/V"
        _restore_kv[key] = {"lora": lora, "no_lora": plain}
    recorded = _restore_kv[key]
    assert _equal(keys, recorded["lora"][0]) and _equal(values, recorded["lora"][1]), \
        f"{where}: restore K/V differ from the stand-alone LoRA forward"

    config = (press.layerwise, press.kvzip_plus_normalization, press.compression_ratio)
    outcome_key = key + (config,)
    if outcome_key in _outcomes:
        assert _outcomes[outcome_key] == (generated, fake_keys), f"{where}: two runs generate different ids"
    _outcomes[outcome_key] = (generated, fake_keys)

    # kvpress's compress_post: min(1, cr + n / context_length) when context_length > 0
    ratio = min(1.0, press.compression_ratio + n / length) if length > 0 else press.compression_ratio
    press._golden = {"n": n, "length": length, "protocol": protocol, "question": question, "ids": generated,
                     "ids_fake_keys": fake_keys, "ratio": ratio, "restore": (keys, values),
                     "no_lora": recorded["no_lora"]}
    for module, mask in zip(main.attention_modules(model), masks):
        module.masked_key_indices = mask  # the stand-alone prefills above reset them
    # The loaded artefacts are dataclass fields; keep them out of the case's "kvpress" description.
    press.restore_embeddings = None
    press.restore_model_name = None
    return [k[0, :, :length] for k in snap["keys"]]


# ----------------------------------------------------------------------------------------------------------------
# Kept sets: KVzip's rules with the effective ratio.

def install_recorders(press, log):
    return kvzip_group.install_recorders(press, log)


def check_budget(label, kind, press, kept, length, cr, where):
    if kind != "restorekv":
        return False
    golden = press._golden
    assert golden["ratio"] == min(1.0, cr + golden["n"] / length), where
    return kvzip_group.check_budget(label, "kvzip", press, kept, length, golden["ratio"], where)


def boundary_tie(kind, press, log, kept, cr):
    if kind != "restorekv":
        return None
    return kvzip_group.boundary_tie("kvzip", press, log, kept, press._golden["ratio"])


def check_against_scores(kind, log, kept, tie, where):
    if kind != "restorekv":
        return False
    return kvzip_group.check_against_scores("kvzip", log, kept, tie, where)


# ----------------------------------------------------------------------------------------------------------------

def _nested(tensors):
    """[layer][KV head][token][dim] as exact floats (bf16 and f32 values are exact in a JSON double)."""
    return [t.float().tolist() for t in tensors]


def restorekv_method(variant="restorekv", layerwise=False, artefacts=None):
    params = {"layerwise": layerwise, "n_sink": 4, "chunk_size": 2048}
    if artefacts is not None:
        params["restore_embeddings"] = f"{artefacts}/restore_embeddings.safetensors"
        params["adapter"] = artefacts
    return {"id": "restorekv", "variant": variant, "params": params, "scorer": None}


def case_extra(label, kind, press):
    golden = press._golden
    length, n = golden["length"], golden["n"]
    extra = {
        "method": restorekv_method("restorekv_plus" if press.kvzip_plus_normalization else "restorekv",
                                   press.layerwise, press._golden_artefacts),
        "n_restore": n,
        "effective_compression": golden["ratio"],
        "restore_positions": [length, length + n],
        "generation": {"question_ids": golden["question"], "first_position": length + n,
                       "max_new_tokens": MAX_NEW_TOKENS, "ids": golden["ids"],
                       "ids_fake_keys": golden["ids_fake_keys"]},
    }
    if label == "restorekv" and press.compression_ratio == RECORD_CR:
        keys, values = golden["restore"]
        plain_keys, plain_values = golden["no_lora"]
        extra["restore_kv"] = {"keys": _nested(keys), "values": _nested(values),
                               "keys_without_lora": _nested(plain_keys), "values_without_lora": _nested(plain_values)}
    return extra


NOTES = [note for note in kvzip_group.NOTES if not note.startswith("kvzip(chunk_size")] + [
    "restorekv: RestoreKVPress(compression_ratio, layerwise, n_sink=4, kvzip_plus_normalization, chunk_size=2048) "
    "with the synthetic artefacts of method.params (tests/golden/artefacts/restorekv_tiny_<model>, made by "
    "tools/golden/make_restorekv_artefacts.py: 8 restore embeddings F32, PEFT LoRA r=8 alpha=16 on q,k,v,o,gate,up,"
    "down_proj, F32), loaded by a local post_init_from_model doing kvpress's steps (embeddings cast to the model "
    "dtype, model.load_adapter, disable_adapters); the _plus variant reads the same directory; the llama bf16 model "
    "uses the llama directory (kvpress / transformers round embeddings and LoRA weights to bf16 on load)",
    "restorekv order: prefill of the L ids (no LoRA) -> KVzip's reconstruction scoring of positions [prefix_length, "
    "L) (no LoRA) -> one forward of the n = 8 restore embeddings (inputs_embeds, LoRA enabled, no press hooks) at "
    "positions and cache rows L..L+n-1 over the full, unmasked cache -> KVzip eviction over the L context rows only "
    "with effective_compression = min(1, cr + n/L) (global: int(layers*Hkv*L*ratio) pruned; layerwise: "
    "int(Hkv*L*ratio) per layer; sinks scored max + 1); restore rows are never masked",
    "restorekv kept[l][h]: context positions in [0, L) (complement of masked_key_indices); the cache additionally "
    "holds the n restore rows in every layer and head; budget: kept context rows + n per head average L*(1-cr)",
    "restorekv generation: kvpress's pipeline (_forward/generate_answer) with context_length = "
    "cache.get_seq_length() = L + n: generation.question_ids at positions (and cache rows) L+n.., then each greedy "
    "token at the next position, max_new_tokens 8, stop after eos id 2 (not checked on the first token); "
    "query-agnostic question_ids = prompt question_ids + the stand-in template suffix ids, query-aware = the suffix "
    "ids alone (the question is in the compressed prefill); ids include the stop token when reached. "
    "generation.ids: masked context rows excluded exactly from attention (boolean sdpa mask); "
    "generation.ids_fake_keys: kvpress's own null-key masking (attention_patch.py), null where its "
    "search_hyperplane raised (no null key for the many queries of the question forward on these random models); "
    "where not null it equals ids",
    f"restorekv restore_kv (cases of press 'restorekv' at compression {RECORD_CR}; identical, bit for bit, in every "
    "case of the same model/dtype/prompt/protocol): [layer][KV head][restore token][head_dim] post-RoPE keys and "
    "values of cache rows L..L+n-1 (exact f32 / bf16 values), and the same forward with the adapter disabled "
    "(keys_without_lora, values_without_lora) for checking the embeddings forward apart from the LoRA",
    "restorekv boundary_tie: as kvzip, at the effective ratio's pruning boundary",
]


def press_table():
    """(label, registry, factory(cr), method, attn, kind) as the main script's press_table()."""
    return [
        ("restorekv", "RestoreKV", lambda cr: restorekv_press(cr), restorekv_method(), "sdpa", "restorekv"),
        ("restorekv(layerwise=True)", None, lambda cr: restorekv_press(cr, layerwise=True),
         restorekv_method(layerwise=True), "sdpa", "restorekv"),
        ("restorekv_plus", "RestoreKV_plus", lambda cr: restorekv_press(cr, kvzip_plus_normalization=True),
         restorekv_method("restorekv_plus"), "sdpa", "restorekv"),
    ]
