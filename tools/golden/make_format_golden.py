#!/usr/bin/env python3
"""Golden fixtures for the model file readers (runners/model/formats), written to tests/golden/formats/.

Rerun (from the repository root, after tools/setup.sh made the venv; CPU only, ~1 minute):
    tools/.venv/bin/python tools/golden/make_format_golden.py [--out tests/golden/formats]
Packages (tools/golden/requirements.txt): gguf 0.19, safetensors 0.8, numpy, torch, transformers 5.
The outputs are deterministic (fixed seeds) and committed; CI never runs this script.

What it writes and what the C++ tests (tests/model_formats) compare, bit for bit:
  gguf_types.gguf / gguf_types.json
      A GGUF v3 file (general.alignment 64) with metadata of every value type, arrays of every element
      type and nested arrays, plus tensors of every supported ggml type (F32, F16, BF16, Q8_0, Q4_0,
      Q4_1) made with gguf.quants.quantize, each paired with an F32 tensor "<name>.expected" that holds
      gguf.quants.dequantize's output, and one Q5_0 tensor (an unsupported type). The JSON lists every
      key's type and value and every tensor's ggml ne[] and type.
  dtypes.safetensors / dtypes.json
      safetensors (written by the safetensors package) with F32, F16, BF16, I32, a 0-rank and an empty
      tensor and __metadata__; the JSON holds each tensor's dtype, shape and f32 values.
  tiny-llama-bf16-sharded/   transformers LlamaForCausalLM (llama3 rope, GQA, untied), saved bf16 and
                             sharded with model.safetensors.index.json by save_pretrained.
  tiny-qwen2-f32/            transformers Qwen2ForCausalLM (q/k/v biases, tied embeddings), f32.
  tiny-llama.gguf            the tiny Llama converted like llama.cpp's convert_hf_to_gguf.py (Q/K rows
                             permuted for interleaved RoPE; F32 and BF16 tensors).
  tiny-qwen2.gguf            the tiny Qwen2 converted the same way (no permutation; no output.weight).
  ../../fuzz/corpus/fuzz_gguf/, fuzz_safetensors/  small valid seed files for the fuzz targets.
  reference.json             per model: the config values and, per HF tensor, its shape and the FNV-1a
                             64-bit hash of its f32 little-endian bytes as transformers holds them
                             (for the GGUF files: as transformers loads them with gguf_file=, which
                             checks the reverse permutation; the script asserts they equal the HF
                             weights). When models/smollm2-135m-instruct/*.gguf exists, the same for a
                             few tensors of that file as transformers loads it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from gguf import GGUFWriter, GGMLQuantizationType, GGUFValueType
from gguf import quants
from safetensors.numpy import save_file

REPO = Path(__file__).resolve().parents[2]
SMOLLM2 = REPO / "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"


def sha256_f32(array: np.ndarray) -> str:
    """SHA-256 of the little-endian f32 bytes (row-major); the C++ test computes the same."""
    return hashlib.sha256(np.ascontiguousarray(array, dtype="<f4").tobytes()).hexdigest()


# ---------------------------------------------------------------------------------------------
# gguf_types.gguf


def write_gguf_types(out: Path) -> None:
    rng = np.random.default_rng(20240601)
    writer = GGUFWriter(out / "gguf_types.gguf", arch="kvaudit_golden")
    writer.add_custom_alignment(64)
    expected_kv: dict[str, dict] = {}

    def scalar(key: str, value, vtype: GGUFValueType, adder) -> None:
        adder(key, value)
        expected_kv[key] = {"type": vtype.name.lower(), "value": value}

    scalar("test.u8", 200, GGUFValueType.UINT8, writer.add_uint8)
    scalar("test.i8", -100, GGUFValueType.INT8, writer.add_int8)
    scalar("test.u16", 60000, GGUFValueType.UINT16, writer.add_uint16)
    scalar("test.i16", -30000, GGUFValueType.INT16, writer.add_int16)
    scalar("test.u32", 4000000000, GGUFValueType.UINT32, writer.add_uint32)
    scalar("test.i32", -2000000000, GGUFValueType.INT32, writer.add_int32)
    f32_value = float(np.float32(3.14159274))
    scalar("test.f32", f32_value, GGUFValueType.FLOAT32, writer.add_float32)
    scalar("test.bool_true", True, GGUFValueType.BOOL, writer.add_bool)
    scalar("test.bool_false", False, GGUFValueType.BOOL, writer.add_bool)
    scalar("test.string", "héllo, GGUF ✓", GGUFValueType.STRING, writer.add_string)
    scalar("test.u64", 18000000000000000000, GGUFValueType.UINT64, writer.add_uint64)
    scalar("test.i64", -9000000000000000000, GGUFValueType.INT64, writer.add_int64)
    scalar("test.f64", 2.718281828459045, GGUFValueType.FLOAT64, writer.add_float64)

    arrays = {
        "test.array_u8": ([1, 2, 255], GGUFValueType.UINT8),
        "test.array_i8": ([-128, 0, 127], GGUFValueType.INT8),
        "test.array_u16": ([0, 65535], GGUFValueType.UINT16),
        "test.array_i16": ([-32768, 32767], GGUFValueType.INT16),
        "test.array_u32": ([7, 4294967295], GGUFValueType.UINT32),
        "test.array_i32": ([-1, 0, 1, 2147483647], GGUFValueType.INT32),
        "test.array_f32": ([float(np.float32(x)) for x in (0.5, -1.25, 1e-3)], GGUFValueType.FLOAT32),
        "test.array_bool": ([True, False, True], GGUFValueType.BOOL),
        "test.array_string": (["a", "", "merges like Ġ t"], GGUFValueType.STRING),
        "test.array_u64": ([0, 18446744073709551615], GGUFValueType.UINT64),
        "test.array_i64": ([-9223372036854775808, 5], GGUFValueType.INT64),
        "test.array_f64": ([0.1, -2.5e300], GGUFValueType.FLOAT64),
    }
    for key, (values, sub_type) in arrays.items():
        writer.add_key_value(key, values, GGUFValueType.ARRAY, sub_type=sub_type)
        expected_kv[key] = {"type": "array", "element_type": sub_type.name.lower(), "value": values}
    nested_int = [[1, 2, 3], [4], [5, 6]]
    writer.add_key_value("test.nested_i32", nested_int, GGUFValueType.ARRAY)
    expected_kv["test.nested_i32"] = {"type": "array", "element_type": "array", "value": nested_int}
    nested_str = [["x", "y"], ["z"]]
    writer.add_key_value("test.nested_string", nested_str, GGUFValueType.ARRAY)
    expected_kv["test.nested_string"] = {"type": "array", "element_type": "array", "value": nested_str}

    tensors: dict[str, dict] = {}
    # Values with a spread of magnitudes, so every nibble and the min/scale paths are exercised.
    base = (rng.standard_normal((3, 64)) * np.array([[0.01], [1.0], [40.0]])).astype(np.float32)
    for qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16,
                  GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q4_0, GGMLQuantizationType.Q4_1,
                  GGMLQuantizationType.Q5_0):
        name = "t_" + qtype.name.lower()
        data = quants.quantize(base, qtype)
        if qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
        tensors[name] = {"type": qtype.name, "ne": [64, 3], "supported": qtype != GGMLQuantizationType.Q5_0}
        if qtype != GGMLQuantizationType.Q5_0:
            reference = quants.dequantize(data, qtype).astype(np.float32).reshape(3, 64)
            writer.add_tensor(name + ".expected", reference)
            tensors[name + ".expected"] = {"type": "F32", "ne": [64, 3], "supported": True}
    cube = np.arange(2 * 3 * 32, dtype=np.float32).reshape(2, 3, 32)  # torch shape [2, 3, 32]
    writer.add_tensor("t_3d", cube)
    tensors["t_3d"] = {"type": "F32", "ne": [32, 3, 2], "supported": True}

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    (out / "gguf_types.json").write_text(
        json.dumps({"alignment": 64, "version": 3, "metadata": expected_kv, "tensors": tensors},
                   indent=1, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------------------------
# dtypes.safetensors


def write_safetensors_dtypes(out: Path) -> None:
    rng = np.random.default_rng(7)
    tensors = {
        "f32": rng.standard_normal((2, 3)).astype(np.float32),
        "f16": rng.standard_normal((4,)).astype(np.float16),
        "i32": np.array([[1, -2], [3, 4]], dtype=np.int32),
        "scalar": np.array(1.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    bf16 = torch.tensor(rng.standard_normal((3, 2)), dtype=torch.bfloat16)
    # safetensors.numpy has no bf16; write via torch for all tensors so the bf16 one is included.
    from safetensors.torch import save_file as save_torch
    torch_tensors = {k: torch.from_numpy(v.copy()) for k, v in tensors.items()}
    torch_tensors["bf16"] = bf16
    save_torch(torch_tensors, str(out / "dtypes.safetensors"), metadata={"format": "pt", "note": "kvaudit"})
    expected = {}
    for name, tensor in torch_tensors.items():
        dtype = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                 torch.int32: "I32"}[tensor.dtype]
        entry = {"dtype": dtype, "shape": list(tensor.shape)}
        if tensor.is_floating_point():
            entry["values"] = [float(x) for x in tensor.to(torch.float32).flatten().tolist()]
        expected[name] = entry
    (out / "dtypes.json").write_text(
        json.dumps({"metadata": {"format": "pt", "note": "kvaudit"}, "tensors": expected}, indent=1) + "\n")


# ---------------------------------------------------------------------------------------------
# tiny HF models and their GGUF conversions


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(1234)
    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1, eos_token_id=[2, 3],
        pad_token_id=None,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64})
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    return model


def tiny_qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(4321)
    config = Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=128,
        rms_norm_eps=1e-6, tie_word_embeddings=True, bos_token_id=5, eos_token_id=6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, use_sliding_window=False)
    model = Qwen2ForCausalLM(config).to(torch.float32)
    # Non-zero biases, so a loader that drops or misplaces them is caught.
    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0.0, 0.5)
        for layer in model.model.layers:
            layer.input_layernorm.weight.normal_(1.0, 0.1)
    return model


def llama_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py LlamaModel.permute (HF rotate-half rows -> interleaved)."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def write_gguf_model(model, path: Path, arch: str, bf16_names: set[str]) -> None:
    config = model.config
    writer = GGUFWriter(path, arch=arch)
    writer.add_name("kvaudit tiny " + arch)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_file_type(0)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"tok{i}" for i in range(config.vocab_size)])
    writer.add_bos_token_id(config.bos_token_id)
    eos = config.eos_token_id
    writer.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
                 "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
                 "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
                 "self_attn.v_proj.bias": "attn_v.bias", "self_attn.o_proj.weight": "attn_output.weight",
                 "post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
                 "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    state = model.state_dict()
    for hf_name, tensor in state.items():
        if hf_name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        if hf_name in names:
            gguf_name = names[hf_name]
        else:
            parts = hf_name.split(".")
            gguf_name = f"blk.{parts[2]}." + per_layer[".".join(parts[3:])]
        data = tensor.to(torch.float32).numpy()
        if arch == "llama" and ".attn_q." in gguf_name:
            data = llama_permute(data, config.num_attention_heads)
        if arch == "llama" and ".attn_k." in gguf_name:
            data = llama_permute(data, config.num_key_value_heads)
        if gguf_name in bf16_names:
            raw = quants.quantize(data, GGMLQuantizationType.BF16)
            writer.add_tensor(gguf_name, raw, raw_shape=raw.shape, raw_dtype=GGMLQuantizationType.BF16)
        else:
            writer.add_tensor(gguf_name, np.ascontiguousarray(data, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def hashes(state: dict[str, torch.Tensor]) -> dict[str, dict]:
    return {name: {"shape": list(t.shape), "sha256": sha256_f32(t.detach().to(torch.float32).numpy())}
            for name, t in sorted(state.items())}


def load_gguf_with_transformers(path: Path) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(path, Path(tmp) / path.name)
        model = AutoModelForCausalLM.from_pretrained(tmp, gguf_file=path.name, dtype=torch.float32)
    return model.state_dict()


def write_models(out: Path) -> dict:
    reference: dict[str, dict] = {}

    llama = tiny_llama()
    llama_dir = out / "tiny-llama-bf16-sharded"
    shutil.rmtree(llama_dir, ignore_errors=True)
    llama.save_pretrained(llama_dir, max_shard_size="40KB")
    assert (llama_dir / "model.safetensors.index.json").exists(), "expected a sharded checkpoint"
    llama_state = {k: v for k, v in llama.state_dict().items()}
    reference["tiny-llama-bf16-sharded"] = {"tensors": hashes(llama_state)}

    llama_gguf = out / "tiny-llama.gguf"
    write_gguf_model(llama, llama_gguf, "llama",
                     bf16_names={"blk.0.ffn_up.weight", "blk.1.attn_q.weight", "token_embd.weight"})
    from_gguf = load_gguf_with_transformers(llama_gguf)
    for name, tensor in llama_state.items():
        assert torch.equal(from_gguf[name].to(torch.float32), tensor.to(torch.float32)), \
            f"transformers' GGUF load of {name} differs from the HF weights (permutation?)"
    reference["tiny-llama.gguf"] = {"tensors": hashes(from_gguf)}

    qwen2 = tiny_qwen2()
    qwen2_dir = out / "tiny-qwen2-f32"
    shutil.rmtree(qwen2_dir, ignore_errors=True)
    qwen2.save_pretrained(qwen2_dir)
    qwen2_state = qwen2.state_dict()
    reference["tiny-qwen2-f32"] = {"tensors": hashes(qwen2_state)}
    qwen2_gguf = out / "tiny-qwen2.gguf"
    write_gguf_model(qwen2, qwen2_gguf, "qwen2", bf16_names=set())
    from_gguf = load_gguf_with_transformers(qwen2_gguf)
    for name, tensor in qwen2_state.items():
        assert torch.equal(from_gguf[name], tensor), f"transformers' GGUF load of {name} differs"
    reference["tiny-qwen2.gguf"] = {"tensors": hashes(from_gguf)}

    if SMOLLM2.exists():
        state = load_gguf_with_transformers(SMOLLM2)
        keep = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
                "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.down_proj.weight",
                "model.layers.29.self_attn.q_proj.weight", "model.layers.29.input_layernorm.weight",
                "model.norm.weight"]
        reference["smollm2-135m-instruct-q4_1.gguf"] = {
            "file": str(SMOLLM2.relative_to(REPO)), "tensors": hashes({k: state[k] for k in keep})}
    else:
        print(f"note: {SMOLLM2} is absent; its reference hashes are not written")
    return reference


# ---------------------------------------------------------------------------------------------
# fuzz seed corpora (fuzz/corpus/fuzz_gguf, fuzz/corpus/fuzz_safetensors): small valid files, each
# under tools/fuzz.sh's -max_len of 4096 bytes.


def write_fuzz_seeds(corpus: Path) -> None:
    gguf_dir = corpus / "fuzz_gguf"
    st_dir = corpus / "fuzz_safetensors"
    gguf_dir.mkdir(parents=True, exist_ok=True)
    st_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(99)

    # Every supported ggml type, one 32-element row each, plus metadata of several types.
    writer = GGUFWriter(gguf_dir / "types.gguf", arch="seed")
    writer.add_uint32("seed.u32", 7)
    writer.add_float32("seed.f32", 0.25)
    writer.add_bool("seed.bool", True)
    writer.add_string("seed.string", "seed")
    writer.add_key_value("seed.nested", [[1, 2], [3]], GGUFValueType.ARRAY)
    writer.add_key_value("seed.i64s", [-1, 2], GGUFValueType.ARRAY, sub_type=GGUFValueType.INT64)
    row = rng.standard_normal((1, 32)).astype(np.float32)
    for qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16,
                  GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q4_0, GGMLQuantizationType.Q4_1):
        data = quants.quantize(row, qtype)
        if qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            writer.add_tensor(qtype.name.lower(), data)
        else:
            writer.add_tensor(qtype.name.lower(), data, raw_shape=data.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    # Minimal llama / qwen2 models that config_from_gguf accepts (hidden 8, 2 heads, 1 kv head).
    for arch in ("llama", "qwen2"):
        writer = GGUFWriter(gguf_dir / f"{arch}_model.gguf", arch=arch)
        writer.add_context_length(16)
        writer.add_embedding_length(8)
        writer.add_block_count(1)
        writer.add_feed_forward_length(16)
        writer.add_head_count(2)
        writer.add_head_count_kv(1)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_rope_freq_base(10000.0)
        writer.add_token_list(["a", "b", "c", "d"])
        writer.add_bos_token_id(0)
        writer.add_eos_token_id(1)
        shapes = {"token_embd.weight": (4, 8), "blk.0.attn_norm.weight": (8,),
                  "blk.0.attn_q.weight": (8, 8), "blk.0.attn_k.weight": (4, 8),
                  "blk.0.attn_v.weight": (4, 8), "blk.0.attn_output.weight": (8, 8),
                  "blk.0.ffn_norm.weight": (8,), "blk.0.ffn_gate.weight": (16, 8),
                  "blk.0.ffn_up.weight": (16, 8), "blk.0.ffn_down.weight": (8, 16),
                  "output_norm.weight": (8,)}
        if arch == "qwen2":
            shapes.update({"blk.0.attn_q.bias": (8,), "blk.0.attn_k.bias": (4,), "blk.0.attn_v.bias": (4,)})
        for name, shape in shapes.items():
            writer.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    from safetensors.torch import save_file as save_torch
    save_torch({"w": torch.tensor(rng.standard_normal((2, 3)), dtype=torch.float32)}, str(st_dir / "f32.safetensors"))
    save_torch({"h": torch.tensor(rng.standard_normal(4), dtype=torch.float16),
                "b": torch.tensor(rng.standard_normal((2, 2)), dtype=torch.bfloat16),
                "i": torch.tensor([1, 2], dtype=torch.int64)}, str(st_dir / "mixed.safetensors"),
               metadata={"format": "pt"})
    save_torch({"scalar": torch.tensor(2.0), "empty": torch.zeros(0, 3)}, str(st_dir / "edge.safetensors"))
    for path in list(gguf_dir.iterdir()) + list(st_dir.iterdir()):
        assert path.stat().st_size <= 4096, f"{path} exceeds the fuzzer's max_len"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "tests/golden/formats")
    parser.add_argument("--corpus", type=Path, default=REPO / "fuzz/corpus",
                        help="where the fuzz seed corpora go (fuzz_gguf/, fuzz_safetensors/)")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    write_gguf_types(out)
    write_safetensors_dtypes(out)
    write_fuzz_seeds(args.corpus)
    reference = write_models(out)
    (out / "reference.json").write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {out} ({total} bytes)")


if __name__ == "__main__":
    main()
