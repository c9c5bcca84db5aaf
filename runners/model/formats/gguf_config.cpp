// config_from_gguf: ModelConfig from GGUF metadata (key names from llama.cpp `src/llama-arch.cpp`;
// the mapping is listed in gguf_config.h). Mistral-7B-family GGUFs carry general.architecture
// `llama` (llama.cpp converts MistralForCausalLM with its Llama converter); llama.cpp has no plain
// `mistral` architecture (its `mistral3` is a different model), so only llama and qwen2 are read.
#include "runners/model/formats/gguf_config.h"

#include <climits>
#include <cmath>
#include <string>

#include "runners/model/model_error.h"

namespace kvaudit::model {

namespace {

[[noreturn]] void fail_metadata(const GgufFile& file, const std::string& key,
                                const std::string& what) {
  throw ModelInputError(file.source() + ": metadata key '" + key + "': " + what);
}

int positive_int(const GgufFile& file, const std::string& key, std::int64_t value) {
  if (value <= 0 || value > INT_MAX)
    fail_metadata(file, key,
                  "must be a positive integer (at most " + std::to_string(INT_MAX) + "), found " +
                      std::to_string(value));
  return static_cast<int>(value);
}

int required_positive_int(const GgufFile& file, const std::string& key) {
  if (!file.has(key)) fail_metadata(file, key, "is missing (required)");
  return positive_int(file, key, file.get_integer(key));
}

std::optional<int> optional_token_id(const GgufFile& file, const std::string& key) {
  const auto value = file.find_integer(key);
  if (!value) return std::nullopt;
  if (*value < 0 || *value > INT_MAX)
    fail_metadata(file, key, "token id " + std::to_string(*value) + " is out of range");
  return static_cast<int>(*value);
}

double positive_float(const GgufFile& file, const std::string& key, double default_value) {
  const auto value = file.find_float(key);
  if (!value) return default_value;
  if (!(*value > 0.0) || !std::isfinite(*value))
    fail_metadata(file, key, "must be a positive finite number, found " + std::to_string(*value));
  return *value;
}

}  // namespace

ModelConfig config_from_gguf(const GgufFile& file) {
  ModelConfig out;
  const std::string arch_key = "general.architecture";
  if (!file.has(arch_key)) fail_metadata(file, arch_key, "is missing (required)");
  const std::string arch = file.get_string(arch_key);
  out.architecture_name = arch;
  if (arch == "llama")
    out.architecture = Architecture::llama;
  else if (arch == "qwen2")
    out.architecture = Architecture::qwen2;
  else
    fail_metadata(file, arch_key,
                  "architecture '" + arch + "' is not supported (supported: llama, qwen2)");
  const std::string p = arch + ".";

  out.max_position_embeddings = required_positive_int(file, p + "context_length");
  out.hidden_size = required_positive_int(file, p + "embedding_length");
  out.num_layers = required_positive_int(file, p + "block_count");
  out.intermediate_size = required_positive_int(file, p + "feed_forward_length");
  out.num_heads = required_positive_int(file, p + "attention.head_count");
  const std::string kv_key = p + "attention.head_count_kv";
  out.num_kv_heads =
      file.has(kv_key) ? positive_int(file, kv_key, file.get_integer(kv_key)) : out.num_heads;
  if (out.num_heads % out.num_kv_heads != 0)
    fail_metadata(file, kv_key,
                  std::to_string(out.num_kv_heads) + " does not divide head_count " +
                      std::to_string(out.num_heads));

  // Head size: key_length when present, else embedding_length / head_count.
  const std::string key_length_key = p + "attention.key_length";
  if (file.has(key_length_key)) {
    out.head_dim = positive_int(file, key_length_key, file.get_integer(key_length_key));
  } else {
    if (out.hidden_size % out.num_heads != 0)
      fail_metadata(file, p + "embedding_length",
                    std::to_string(out.hidden_size) + " is not divisible by head_count " +
                        std::to_string(out.num_heads));
    out.head_dim = out.hidden_size / out.num_heads;
  }
  const std::string value_length_key = p + "attention.value_length";
  if (file.has(value_length_key) && file.get_integer(value_length_key) != out.head_dim)
    fail_metadata(file, value_length_key,
                  "value head size " + std::to_string(file.get_integer(value_length_key)) +
                      " differs from the key head size " + std::to_string(out.head_dim) +
                      " (not supported)");
  const std::string rope_dim_key = p + "rope.dimension_count";
  if (file.has(rope_dim_key) && file.get_integer(rope_dim_key) != out.head_dim)
    fail_metadata(file, rope_dim_key,
                  "rotary dimension " + std::to_string(file.get_integer(rope_dim_key)) +
                      " differs from the head size " + std::to_string(out.head_dim) +
                      " (partial rotary embeddings are not supported)");
  if (out.head_dim % 2 != 0)
    fail_metadata(file, rope_dim_key,
                  "head size " + std::to_string(out.head_dim) + " must be even (rotate-half RoPE)");

  const std::string eps_key = p + "attention.layer_norm_rms_epsilon";
  if (!file.has(eps_key)) fail_metadata(file, eps_key, "is missing (required)");
  out.rms_norm_eps = positive_float(file, eps_key, 1e-6);
  out.rope.theta = positive_float(file, p + "rope.freq_base", 10000.0);

  // RoPE scaling: llama.cpp writes rope.scaling.type (none/linear/yarn/longrope) and, for Llama-3.1
  // style llama3 scaling, a `rope_freqs.weight` tensor of per-frequency factors.
  const std::string scaling_key = p + "rope.scaling.type";
  if (const auto type = file.find_string(scaling_key); type && *type != "none") {
    const double factor = positive_float(file, p + "rope.scaling.factor", 1.0);
    if (!(*type == "linear" && factor == 1.0))
      fail_metadata(file, scaling_key,
                    "rope scaling '" + *type +
                        "' is not supported (only none; llama3 scaling needs the HF "
                        "checkpoint)");
  }
  if (file.has_tensor("rope_freqs.weight"))
    throw ModelInputError(file.source() +
                          ": tensor 'rope_freqs.weight': llama3-style RoPE "
                          "frequency factors in GGUF are not supported (load the HF checkpoint, "
                          "whose config.json carries rope_scaling)");

  // Vocabulary size.
  const std::string tokens_key = "tokenizer.ggml.tokens";
  const std::string vocab_key = p + "vocab_size";
  if (file.has(tokens_key)) {
    const auto count = file.array_size(tokens_key);
    if (count == 0 || count > INT_MAX)
      fail_metadata(file, tokens_key, "has " + std::to_string(count) + " tokens");
    out.vocab_size = static_cast<int>(count);
  } else if (file.has(vocab_key)) {
    out.vocab_size = positive_int(file, vocab_key, file.get_integer(vocab_key));
  } else if (const GgufTensorInfo* embed = file.find_tensor("token_embd.weight");
             embed != nullptr && embed->ne.size() == 2) {
    out.vocab_size = positive_int(file, vocab_key, static_cast<std::int64_t>(embed->ne[1]));
  } else {
    fail_metadata(file, tokens_key,
                  "is missing, and so are " + vocab_key +
                      " and a 2-D token_embd.weight (the vocabulary size is unknown)");
  }

  out.bos_token_id = optional_token_id(file, "tokenizer.ggml.bos_token_id");
  if (const auto eos = optional_token_id(file, "tokenizer.ggml.eos_token_id"))
    out.eos_token_ids.push_back(*eos);
  out.pad_token_id = optional_token_id(file, "tokenizer.ggml.padding_token_id");

  out.tie_word_embeddings = !file.has_tensor("output.weight");
  out.attention_bias = file.has_tensor("blk.0.attn_q.bias");
  out.dtype = ComputeDtype::f32;
  return out;
}

}  // namespace kvaudit::model
