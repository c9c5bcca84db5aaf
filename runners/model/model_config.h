// ModelConfig: everything the forward pass needs to know about an architecture, read from HF
// config.json (+ generation_config.json) or from GGUF metadata. Nothing is hard-coded per model
// (docs/design/numerics.md §Model config). Readers: hf_config.h (config.json) and
// gguf_config.h (GGUF metadata), both in runners/model/formats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvaudit::model {

// The decoder family. All three share the pre-norm Llama block; they differ in flags below.
enum class Architecture { llama, qwen2, mistral };

// How inv_freq is derived from rope_theta. `llama3` is HF `_compute_llama3_parameters`.
enum class RopeScalingType { none, llama3 };

struct RopeConfig {
  double theta = 10000.0;
  RopeScalingType scaling = RopeScalingType::none;
  // llama3 scaling parameters (unused when scaling == none).
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_position_embeddings = 8192;
};

// The dtype the checkpoint stores (HF `torch_dtype` / the tensors themselves). It decides the
// numerics of the CPU backend: bf16 emulates HF's bf16 rounding points, f32 computes in f32.
// GGUF quantized weights are dequantized to f32 (as transformers does with `gguf_file=`).
enum class ComputeDtype { f32, bf16 };

struct ModelConfig {
  Architecture architecture = Architecture::llama;
  std::string architecture_name;  // as written in the file, e.g. "LlamaForCausalLM" or "llama"
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // config.head_dim when present, else hidden_size / num_heads
  int vocab_size = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  std::int64_t max_position_embeddings = 0;
  bool attention_bias = false;       // q/k/v biases (Qwen2); o_proj never has one
  bool tie_word_embeddings = false;  // lm_head shares embed_tokens
  std::optional<int> bos_token_id;
  std::vector<int> eos_token_ids;  // generation_config.json wins over config.json
  std::optional<int> pad_token_id;
  ComputeDtype dtype = ComputeDtype::f32;
};

}  // namespace kvaudit::model
