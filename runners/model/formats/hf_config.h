// ModelConfig from an HF model directory: config.json, plus generation_config.json when present
// (its eos_token_id, an int or a list, wins over config.json's). Field mapping and validation:
//  * architectures[0] in {LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM}, else an error.
//  * hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size,
//    max_position_embeddings: required positive integers; num_key_value_heads defaults to
//    num_attention_heads and must divide it; head_dim defaults to hidden_size / num_attention_heads
//    (which must divide) and must be even (rotate-half RoPE).
//  * rope_theta (default 10000) and rope scaling from `rope_scaling` (transformers 4.x) or
//    `rope_parameters` (transformers 5: {rope_type, rope_theta, ...}); rope type ("rope_type", or
//    the legacy "type") `default` or `llama3` (factor, low_freq_factor, high_freq_factor,
//    original_max_position_embeddings); yarn, dynamic, linear, longrope, ... are rejected.
//  * rms_norm_eps (default 1e-6).
//  * attention_bias: Qwen2 always has q/k/v biases (HF Qwen2Attention builds q/k/v_proj with
//    bias=True and ignores the field); Llama/Mistral read `attention_bias` (default false).
//    An o_proj bias (Llama attention_bias=true) is not supported and rejected, as is mlp_bias=true.
//  * tie_word_embeddings (default false in LlamaConfig/MistralConfig/Qwen2Config).
//  * bos_token_id / eos_token_id (int or list) / pad_token_id (null allowed).
//  * torch_dtype or dtype: "bfloat16" -> bf16, "float32" -> f32. "float16" is mapped to f32: the
//  CPU
//    backend has no f16 rounding emulation, and f16 values widen exactly, so f32 compute is the
//    closest faithful choice (documented divergence from HF's f16 rounding). Absent -> f32 here;
//    load_hf_weights then uses the checkpoint's dtype (see read_hf_config_file).
//  * sliding window: `sliding_window` null, or `use_sliding_window` false, or a window >=
//    max_position_embeddings is fine; an active smaller window is rejected (not implemented).
// Every error is a ModelInputError naming the file and the JSON field.
#pragma once

#include <filesystem>

#include "runners/model/model_config.h"

namespace kvaudit::model {

ModelConfig read_hf_config(const std::filesystem::path& model_dir);

// read_hf_config plus whether config.json declares the dtype (torch_dtype or dtype). When it does
// not, load_hf_weights takes it from the checkpoint (BF16 embeddings -> bf16, else f32), as
// transformers' dtype="auto" falls back to the state dict's floating-point dtype.
struct HfConfigFile {
  ModelConfig config;
  bool dtype_declared = false;
};
HfConfigFile read_hf_config_file(const std::filesystem::path& model_dir);

}  // namespace kvaudit::model
