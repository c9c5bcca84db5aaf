#!/usr/bin/env python3
"""HF-parity golden fixtures for the model runtime: four tiny random decoder models and their HF logits.

What it writes (tests/golden/tiny_models/, read by tests/parity/tiny_model_parity_test.cpp):
  <model>/f32/ and <model>/bf16/   HF layout (config.json, generation_config.json, model.safetensors),
                                   written by `save_pretrained` in float32 and in bfloat16
  reference.safetensors            F32 tensors (bf16 results upcast exactly):
                                     <model>.<dtype>.<impl>.logits.<prompt>   [T, vocab]
                                     <model>.<dtype>.<impl>.hidden.<prompt>   [L+2, T, hidden]
                                       (only for HIDDEN_STATE_MODEL and HIDDEN_STATE_PROMPT: rows are
                                       the embedding output, the output of every decoder layer, and
                                       the final-norm output; captured with forward hooks)
                                     <model>.<dtype>.<impl>.keys.<prompt>.layer<l>    [kv_heads, T, head_dim]
                                     <model>.<dtype>.<impl>.values.<prompt>.layer<l>  [kv_heads, T, head_dim]
                                       (post-RoPE keys and values from HF's DynamicCache, every model,
                                       prompt KEY_VALUE_PROMPT: they localize a mismatch to a layer)
                                     <model>.inv_freq   [head_dim/2]  HF's RoPE inverse frequencies (f32)
  reference.json                   prompts (token ids), model configs, greedy continuations, HF's own
                                   eager-vs-sdpa differences, top-2 logit margins, versions, notes.

Models (all GQA: 4 query heads, 2 KV heads, head_dim 16, hidden 64, intermediate 128, 2 layers, vocab 300,
max_position_embeddings 512; weights drawn so that logits vary over several units, biases nonzero):
  llama        LlamaForCausalLM, default RoPE (theta 10000)
  llama3_rope  LlamaForCausalLM, rope_scaling llama3: theta 10000, factor 8, low_freq_factor 1,
               high_freq_factor 8, original_max_position_embeddings 128. With head_dim 16 there are 8
               frequencies inv_freq[i] = 10000^(-i/8), wavelength 2*pi*10000^(i/8) =
               6.28, 19.9, 62.8, 198.7, 628, 1987, 6283, 19869. high_freq_wavelen = 128/8 = 16 and
               low_freq_wavelen = 128/1 = 128, so i=0 is kept (wavelength < 16), i=1,2 are smoothed
               (16 <= wavelength <= 128; smooth = (128/wavelength - 1)/(8 - 1) = 0.778, 0.148) and i=3..7
               are divided by 8: all three llama3 bands occur.
  qwen2        Qwen2ForCausalLM: q/k/v biases, tie_word_embeddings=True, rope_theta 1e6
  mistral      MistralForCausalLM, sliding_window null

Reference runs: every model is reloaded from its saved directory (so the bf16 reference sees exactly the
bf16 weights on disk) with attn_implementation "eager" and "sdpa", on the CPU, one thread
(torch.set_num_threads(1): fixed reduction order). "sdpa" is pinned with
torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION]); the script checks with the profiler that
HF's forward really runs aten::_scaled_dot_product_flash_attention_for_cpu (the CPU default for f32 and
bf16 alike when there is no dropout; HF passes is_causal=True with no mask for an unpadded prefill and
enable_gqa=True). That CPU kernel (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp) computes
S = Q.K^T with an f32 GEMM, scales in f32, keeps a running row max and sum over key blocks of 512
(query blocks of 32 below 192 queries), exponentiates with a vectorised approximation, stores P in
the input dtype (bf16 P for bf16 inputs), accumulates P.V in f32 and multiplies by 1/sum at the end,
then casts the output to the input dtype. The approximation differs by dtype: for f32 inputs it is
accurate to a few f32 ulps, for bf16 inputs torch 2.15 uses a faster exp with relative error up to
~1e-4 (exp(0) = 1 - 5.3e-5). measure_cpu_sdpa_exp() measures both through the kernel's own
logsumexp output and stores them ("cpu_sdpa_exp_relative_error"). In bf16 that error flips the bf16
rounding of a few percent of the P values, so an sdpa implementation with an exact exp (FA2 numerics)
differs from HF's CPU sdpa by that much more than from HF's eager.
Greedy continuations: model.generate(do_sample=False, max_new_tokens=16) from GREEDY_PROMPT; the prompt
is drawn (seeded) until HF's top-1/top-2 margin along the generated path is at least
GREEDY_MIN_MARGIN_BF16_ULPS bf16 ulps of the top logit under both backends and both dtypes, so a tie
broken by rounding noise cannot make the comparison flaky (the margins are stored), and until every
continuation has at least GREEDY_MIN_DISTINCT_TOKENS distinct tokens (not a single repeated token).

Rerun (from the repository root; needs the git-ignored venv, see tools/golden/requirements.txt):
  tools/.venv/bin/python tools/golden/make_model_golden.py [--out tests/golden/tiny_models]
The output is deterministic for the pinned versions (seeded RNG, one thread).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import platform
import shutil
import sys
from pathlib import Path

import numpy as np
import safetensors
import safetensors.torch
import torch
import transformers
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

SEED = 20241129
HIDDEN = 64
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 16
INTERMEDIATE = 128
LAYERS = 2
VOCAB = 300
MAX_POSITIONS = 512
BOS_ID = 1
EOS_ID = 2
PROMPT_LENGTHS = (8, 16, 32)
GREEDY_NEW_TOKENS = 16
GREEDY_PROMPT_LENGTH = 12
GREEDY_MIN_MARGIN_BF16_ULPS = 4.0
GREEDY_MIN_DISTINCT_TOKENS = 4
HIDDEN_STATE_MODEL = "qwen2"
HIDDEN_STATE_PROMPT = 2
KEY_VALUE_PROMPT = 2
IMPLEMENTATIONS = ("eager", "sdpa")
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
CPU_SDPA_OP = "aten::_scaled_dot_product_flash_attention_for_cpu"

LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 10000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 8.0,
    "original_max_position_embeddings": 128,
}


def common_config() -> dict:
    return {
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "vocab_size": VOCAB,
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "hidden_act": "silu",
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": None,
    }


def model_specs() -> dict:
    """name -> (config class, config kwargs, model class)."""
    t = transformers
    return {
        "llama": (
            t.LlamaConfig,
            {**common_config(), "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
             "tie_word_embeddings": False, "attention_bias": False},
            t.LlamaForCausalLM,
        ),
        "llama3_rope": (
            t.LlamaConfig,
            {**common_config(), "rope_parameters": dict(LLAMA3_ROPE), "tie_word_embeddings": False,
             "attention_bias": False},
            t.LlamaForCausalLM,
        ),
        "qwen2": (
            t.Qwen2Config,
            {**common_config(), "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
             "tie_word_embeddings": True, "use_sliding_window": False, "sliding_window": None,
             "rms_norm_eps": 1e-6},
            t.Qwen2ForCausalLM,
        ),
        "mistral": (
            t.MistralConfig,
            {**common_config(), "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
             "tie_word_embeddings": False, "sliding_window": None},
            t.MistralForCausalLM,
        ),
    }


def llama3_bands(rope: dict, head_dim: int) -> list[dict]:
    """The llama3 band of every frequency (the HF _compute_llama3_parameters rule), for the notes."""
    old = rope["original_max_position_embeddings"]
    low_wavelen = old / rope["low_freq_factor"]
    high_wavelen = old / rope["high_freq_factor"]
    bands = []
    for i in range(head_dim // 2):
        inv_freq = rope["rope_theta"] ** (-2.0 * i / head_dim)
        wavelen = 2.0 * math.pi / inv_freq
        if wavelen < high_wavelen:
            band, scaled = "kept", inv_freq
        elif wavelen > low_wavelen:
            band, scaled = "divided_by_factor", inv_freq / rope["factor"]
        else:
            smooth = (old / wavelen - rope["low_freq_factor"]) / (
                rope["high_freq_factor"] - rope["low_freq_factor"])
            band, scaled = "smoothed", (1 - smooth) * inv_freq / rope["factor"] + smooth * inv_freq
        bands.append({"index": i, "wavelength": wavelen, "band": band, "inv_freq": inv_freq,
                      "scaled_inv_freq": scaled})
    return bands


@torch.no_grad()
def initialise_weights(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Draw every parameter so that activations are O(1), attention is neither uniform nor one-hot and
    logits spread over several units (HF's default init, std 0.02, gives near-constant logits)."""

    def normal(shape, std):
        return torch.randn(shape, generator=generator, dtype=torch.float32) * std

    for name, parameter in model.named_parameters():
        shape = tuple(parameter.shape)
        if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            value = 0.5 + torch.rand(shape, generator=generator)  # U(0.5, 1.5)
        elif name.endswith(".bias"):
            value = normal(shape, 0.5)
        elif "embed_tokens" in name:
            # Small against the layers' outputs: with tied embeddings (qwen2) a large e_t makes every
            # continuation repeat the last token (its logit is ~|e_t|^2 after the final norm).
            value = normal(shape, 0.3)
        elif "q_proj" in name or "k_proj" in name:
            value = normal(shape, 1.2 / math.sqrt(shape[1]))  # scores q.k*scale with std ~1.5
        elif "lm_head" in name:
            value = normal(shape, 0.5)  # logits std ~4
        else:  # v, o, gate, up, down
            value = normal(shape, 1.0 / math.sqrt(shape[1]))
        parameter.copy_(value)


class HiddenStateRecorder:
    """Forward hooks: the embedding output, each decoder layer's output, the final-norm output."""

    def __init__(self, model: torch.nn.Module):
        self.rows: list[torch.Tensor] = []
        inner = model.model
        self.handles = [inner.embed_tokens.register_forward_hook(self._record)]
        self.handles += [layer.register_forward_hook(self._record) for layer in inner.layers]
        self.handles.append(inner.norm.register_forward_hook(self._record))

    def _record(self, _module, _inputs, output):
        tensor = output[0] if isinstance(output, tuple) else output
        self.rows.append(tensor[0].detach().to(torch.float32).clone())

    def stacked(self) -> torch.Tensor:
        return torch.stack(self.rows)

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def load(directory: Path, dtype: torch.dtype, implementation: str):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, dtype=dtype, attn_implementation=implementation)
    model.eval()
    assert next(model.parameters()).dtype == dtype
    return model


def attention_context(implementation: str):
    if implementation == "sdpa":
        return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    return torch.autograd.grad_mode.no_grad()  # a harmless context manager


@torch.no_grad()
def run_prompt(model, implementation: str, prompt: list[int], record_hidden: bool):
    ids = torch.tensor([prompt], dtype=torch.long)
    recorder = HiddenStateRecorder(model) if record_hidden else None
    with attention_context(implementation):
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            out = model(input_ids=ids, use_cache=True)
    ops = {event.key for event in profiler.key_averages()}
    if implementation == "sdpa" and CPU_SDPA_OP not in ops:
        attention_ops = sorted(op for op in ops if "attention" in op)
        raise RuntimeError(f"sdpa forward did not run {CPU_SDPA_OP}: {attention_ops}")
    if implementation == "eager" and any("scaled_dot_product" in op for op in ops):
        raise RuntimeError("eager forward ran a scaled_dot_product kernel")
    logits = out.logits[0].to(torch.float32)
    hidden = None
    if recorder is not None:
        hidden = recorder.stacked()
        recorder.close()
    cache = []
    for layer in range(model.config.num_hidden_layers):
        layer_cache = out.cache.layers[layer]
        cache.append((layer_cache.keys[0].to(torch.float32).clone(),
                      layer_cache.values[0].to(torch.float32).clone()))
    return logits, hidden, cache


@torch.no_grad()
def measure_cpu_sdpa_exp(dtype: torch.dtype) -> dict:
    """Relative error of the exponential inside torch's CPU flash-attention kernel, read back from its
    logsumexp output. One query (q = e_0, scale s) against 16 keys (one vector of the kernel's AVX-512
    loop): key 0 has score 0 (the row max), keys 1..15 score x = -s. Then
    lse = log(E(0) + 15 E(x)); 16 keys at score 0 give E(0). x covers [-6, 0) in steps of 1/64."""
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu

    def lse(key_values: list[float], scale: float) -> float:
        n, d = len(key_values), 16
        q = torch.zeros(1, 1, 1, d, dtype=dtype)
        q[..., 0] = 1
        k = torch.zeros(1, 1, n, d, dtype=dtype)
        k[0, 0, :, 0] = torch.tensor(key_values, dtype=dtype)
        v = torch.zeros(1, 1, n, d, dtype=dtype)
        return float(op(q, k, v, 0.0, False, attn_mask=None, scale=scale)[1].double())

    exp_zero = math.exp(lse([0.0] * 16, 1.0)) / 16
    worst = abs(exp_zero - 1.0)
    for step in range(1, 6 * 64 + 1):
        x = -step / 64.0
        exp_x = (math.exp(lse([0.0] + [-1.0] * 15, -x)) - exp_zero) / 15
        worst = max(worst, abs(exp_x / math.exp(x) - 1.0))
    return {"at_zero": exp_zero - 1.0, "max_abs_over_minus6_to_0": worst}


def bf16_ulp(value: float) -> float:
    """Spacing of bf16 numbers at |value| (8 significant bits)."""
    if value == 0.0:
        return 2.0 ** -133
    return 2.0 ** (math.floor(math.log2(abs(value))) - 7)


@torch.no_grad()
def greedy(model, implementation: str, prompt: list[int]):
    ids = torch.tensor([prompt], dtype=torch.long)
    with attention_context(implementation):
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=GREEDY_NEW_TOKENS, output_scores=True,
                             return_dict_in_generate=True, pad_token_id=EOS_ID)
    new_tokens = out.sequences[0, len(prompt):].tolist()
    margins_ulps = []
    for scores in out.scores:
        top = torch.topk(scores[0].to(torch.float32), 2).values
        margins_ulps.append(float((top[0] - top[1]) / bf16_ulp(float(top[0]))))
    return new_tokens, margins_ulps


def top2_margins(logits: torch.Tensor) -> list[float]:
    top = torch.topk(logits, 2, dim=-1).values
    return (top[:, 0] - top[:, 1]).tolist()


def relative_norm(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("tests/golden/tiny_models"))
    args = parser.parse_args()
    out_dir: Path = args.out
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    generator = torch.Generator().manual_seed(SEED)
    numpy_rng = np.random.default_rng(SEED)

    if out_dir.exists():
        # Replace a previous output only: never wipe a directory this script did not write.
        if any(out_dir.iterdir()) and not (out_dir / "reference.json").is_file():
            raise SystemExit(f"{out_dir} is not empty and holds no reference.json; refusing to delete it")
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)

    prompts = [[BOS_ID] + numpy_rng.integers(3, VOCAB, size=n - 1).tolist() for n in PROMPT_LENGTHS]
    tensors: dict[str, torch.Tensor] = {}
    manifest_models = {}

    for name, (config_class, config_kwargs, model_class) in model_specs().items():
        config = config_class(**config_kwargs)
        model = model_class(config)
        initialise_weights(model, generator)
        if config.tie_word_embeddings:
            assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        for dtype_name, dtype in DTYPES.items():
            directory = out_dir / name / dtype_name
            copy.deepcopy(model).to(dtype).save_pretrained(directory)

        entry = {"architecture": model_class.__name__, "config": json.loads(config.to_json_string()),
                 "dtypes": {}}
        if name == "llama3_rope":
            entry["llama3_bands"] = llama3_bands(LLAMA3_ROPE, HEAD_DIM)

        # Greedy prompt: drawn until every run has a comfortable top-1 margin along its path.
        greedy_runs = {}
        for attempt in range(1, 200):
            candidate = [BOS_ID] + numpy_rng.integers(3, VOCAB, size=GREEDY_PROMPT_LENGTH - 1).tolist()
            runs = {}
            for dtype_name, dtype in DTYPES.items():
                for implementation in IMPLEMENTATIONS:
                    loaded = load(out_dir / name / dtype_name, dtype, implementation)
                    runs[(dtype_name, implementation)] = greedy(loaded, implementation, candidate)
            worst = min(min(margins) for _, margins in runs.values())
            distinct = min(len(set(tokens)) for tokens, _ in runs.values())
            if worst >= GREEDY_MIN_MARGIN_BF16_ULPS and distinct >= GREEDY_MIN_DISTINCT_TOKENS:
                greedy_runs = runs
                entry["greedy_prompt"] = candidate
                entry["greedy_prompt_attempts"] = attempt
                break
        else:
            raise RuntimeError(f"{name}: no well-conditioned greedy prompt found")

        for dtype_name, dtype in DTYPES.items():
            dtype_entry = {"implementations": {}}
            per_impl_logits = {}
            for implementation in IMPLEMENTATIONS:
                loaded = load(out_dir / name / dtype_name, dtype, implementation)
                if dtype_name == "f32" and implementation == "eager":
                    inv_freq = loaded.model.rotary_emb.inv_freq
                    assert inv_freq.dtype == torch.float32  # HF keeps it f32 for bf16 models too
                    tensors[f"{name}.inv_freq"] = inv_freq.detach().clone().contiguous()
                impl_entry = {"prompts": []}
                for p, prompt in enumerate(prompts):
                    record = name == HIDDEN_STATE_MODEL and p == HIDDEN_STATE_PROMPT
                    logits, hidden, cache = run_prompt(loaded, implementation, prompt, record)
                    key = f"{name}.{dtype_name}.{implementation}"
                    tensors[f"{key}.logits.{p}"] = logits.contiguous()
                    per_impl_logits[(implementation, p)] = logits
                    if record:
                        tensors[f"{key}.hidden.{p}"] = hidden.contiguous()
                    if p == KEY_VALUE_PROMPT:
                        for layer, (keys, values) in enumerate(cache):
                            tensors[f"{key}.keys.{p}.layer{layer}"] = keys.contiguous()
                            tensors[f"{key}.values.{p}.layer{layer}"] = values.contiguous()
                    margins = top2_margins(logits)
                    impl_entry["prompts"].append({
                        "argmax": logits.argmax(dim=-1).tolist(),
                        "min_top2_margin": min(margins),
                    })
                tokens, margins_ulps = greedy_runs[(dtype_name, implementation)]
                impl_entry["greedy_new_tokens"] = tokens
                impl_entry["greedy_min_margin_bf16_ulps"] = min(margins_ulps)
                dtype_entry["implementations"][implementation] = impl_entry
            # HF's own eager-vs-sdpa difference, the natural noise floor for the C++ comparison.
            diffs = []
            for p in range(len(prompts)):
                eager, sdpa = per_impl_logits[("eager", p)], per_impl_logits[("sdpa", p)]
                same_argmax = (eager.argmax(-1) == sdpa.argmax(-1)).float().mean()
                diffs.append({"max_abs": float((eager - sdpa).abs().max()),
                              "relative_norm": relative_norm(sdpa, eager),
                              "argmax_agreement": float(same_argmax)})
            dtype_entry["hf_eager_vs_sdpa"] = diffs
            entry["dtypes"][dtype_name] = dtype_entry
        manifest_models[name] = entry
        print(f"{name}: greedy prompt after {entry['greedy_prompt_attempts']} draw(s); "
              + "; ".join(f"{d} eager-vs-sdpa max|d|={max(x['max_abs'] for x in e['hf_eager_vs_sdpa']):.3g}"
                          for d, e in entry["dtypes"].items()))

    safetensors.torch.save_file(tensors, out_dir / "reference.safetensors",
                                metadata={"generator": "tools/golden/make_model_golden.py"})
    manifest = {
        "generator": "tools/golden/make_model_golden.py",
        "seed": SEED,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "safetensors": safetensors.__version__,
                     "numpy": np.__version__},
        "torch_threads": torch.get_num_threads(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "sdpa_kernel": {"pinned_with": "torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION])",
                        "observed_op": CPU_SDPA_OP,
                        "cpu_sdpa_exp_relative_error": {
                            "f32": measure_cpu_sdpa_exp(torch.float32),
                            "bf16": measure_cpu_sdpa_exp(torch.bfloat16)}},
        "prompts": prompts,
        "greedy_new_tokens": GREEDY_NEW_TOKENS,
        "greedy_min_margin_bf16_ulps_required": GREEDY_MIN_MARGIN_BF16_ULPS,
        "hidden_state_model": HIDDEN_STATE_MODEL,
        "hidden_state_prompt": HIDDEN_STATE_PROMPT,
        "key_value_prompt": KEY_VALUE_PROMPT,
        "hidden_state_rows": ["embedding"] + [f"layer{i}" for i in range(LAYERS)] + ["final_norm"],
        "tensor_names": {
            "logits": "<model>.<dtype>.<impl>.logits.<prompt>  [T, vocab]",
            "hidden": "<model>.<dtype>.<impl>.hidden.<prompt>  [layers + 2, T, hidden]",
            "keys": "<model>.<dtype>.<impl>.keys.<prompt>.layer<l>  [kv_heads, T, head_dim] (post-RoPE)",
            "values": "<model>.<dtype>.<impl>.values.<prompt>.layer<l>  [kv_heads, T, head_dim]",
            "inv_freq": "<model>.inv_freq  [head_dim / 2] (HF rotary_emb.inv_freq, f32)",
        },
        "models": manifest_models,
    }
    (out_dir / "reference.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(f.stat().st_size for f in out_dir.rglob("*") if f.is_file())
    print(f"wrote {out_dir} ({total / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
