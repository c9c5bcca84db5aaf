// Weight/config consistency checks; see weight_validation.h.
#include "runners/model/weight_validation.h"

#include <cstddef>
#include <string>
#include <vector>

#include "runners/model/model_error.h"

namespace kvaudit::model {
namespace {

[[noreturn]] void fail(const model::ModelWeights& weights, const std::string& what) {
  throw model::ModelInputError(weights.source + ": " + what);
}

void check_config(const model::ModelWeights& weights) {
  const model::ModelConfig& c = weights.config;
  auto positive = [&](int value, const char* field) {
    if (value <= 0)
      fail(weights, std::string("config field '") + field + "' must be positive, got " +
                        std::to_string(value));
  };
  positive(c.hidden_size, "hidden_size");
  positive(c.intermediate_size, "intermediate_size");
  positive(c.num_layers, "num_hidden_layers");
  positive(c.num_heads, "num_attention_heads");
  positive(c.num_kv_heads, "num_key_value_heads");
  positive(c.head_dim, "head_dim");
  positive(c.vocab_size, "vocab_size");
  if (c.num_heads % c.num_kv_heads != 0) {
    fail(weights, "num_attention_heads (" + std::to_string(c.num_heads) +
                      ") is not a multiple of num_key_value_heads (" +
                      std::to_string(c.num_kv_heads) + ")");
  }
  if (c.head_dim % 2 != 0) {
    fail(weights, "head_dim (" + std::to_string(c.head_dim) + ") must be even for RoPE");
  }
  if (!(c.rms_norm_eps >= 0.0)) fail(weights, "rms_norm_eps must be non-negative");
  if (!(c.rope.theta > 0.0)) {
    fail(weights, "rope_theta must be positive, got " + std::to_string(c.rope.theta));
  }
  if (c.rope.scaling == model::RopeScalingType::llama3 &&
      (!(c.rope.factor > 0.0) || !(c.rope.low_freq_factor > 0.0) ||
       !(c.rope.high_freq_factor > c.rope.low_freq_factor) ||
       c.rope.original_max_position_embeddings <= 0)) {
    fail(weights,
         "rope_scaling (llama3) needs factor > 0, high_freq_factor > low_freq_factor > 0 and "
         "original_max_position_embeddings > 0");
  }
}

void check_tensor(const model::ModelWeights& weights, const std::vector<float>& tensor,
                  std::size_t expected, const std::string& name, bool optional = false) {
  if (optional && tensor.empty()) return;
  if (tensor.size() != expected) {
    fail(weights, "tensor '" + name + "' has " + std::to_string(tensor.size()) +
                      " values, expected " + std::to_string(expected));
  }
}

}  // namespace

void validate_model_weights(const model::ModelWeights& weights) {
  check_config(weights);
  const model::ModelConfig& c = weights.config;
  const std::size_t hidden = static_cast<std::size_t>(c.hidden_size);
  const std::size_t inter = static_cast<std::size_t>(c.intermediate_size);
  const std::size_t q_dim =
      static_cast<std::size_t>(c.num_heads) * static_cast<std::size_t>(c.head_dim);
  const std::size_t kv_dim =
      static_cast<std::size_t>(c.num_kv_heads) * static_cast<std::size_t>(c.head_dim);
  const std::size_t vocab = static_cast<std::size_t>(c.vocab_size);

  check_tensor(weights, weights.embed_tokens, vocab * hidden, "model.embed_tokens.weight");
  check_tensor(weights, weights.final_norm, hidden, "model.norm.weight");
  if (weights.lm_head.empty() && !c.tie_word_embeddings) {
    fail(weights, "tensor 'lm_head.weight' is missing and tie_word_embeddings is false");
  }
  check_tensor(weights, weights.lm_head, vocab * hidden, "lm_head.weight", /*optional=*/true);
  if (weights.layers.size() != static_cast<std::size_t>(c.num_layers)) {
    fail(weights, "has " + std::to_string(weights.layers.size()) + " layers, config says " +
                      std::to_string(c.num_layers));
  }
  for (std::size_t i = 0; i < weights.layers.size(); ++i) {
    const model::LayerWeights& l = weights.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    check_tensor(weights, l.input_norm, hidden, p + "input_layernorm.weight");
    check_tensor(weights, l.q_proj, q_dim * hidden, p + "self_attn.q_proj.weight");
    check_tensor(weights, l.k_proj, kv_dim * hidden, p + "self_attn.k_proj.weight");
    check_tensor(weights, l.v_proj, kv_dim * hidden, p + "self_attn.v_proj.weight");
    check_tensor(weights, l.q_bias, q_dim, p + "self_attn.q_proj.bias", true);
    check_tensor(weights, l.k_bias, kv_dim, p + "self_attn.k_proj.bias", true);
    check_tensor(weights, l.v_bias, kv_dim, p + "self_attn.v_proj.bias", true);
    if (c.attention_bias && (l.q_bias.empty() || l.k_bias.empty() || l.v_bias.empty())) {
      fail(weights, "config has attention_bias but " + p + "self_attn q/k/v biases are missing");
    }
    check_tensor(weights, l.o_proj, hidden * q_dim, p + "self_attn.o_proj.weight");
    check_tensor(weights, l.post_attention_norm, hidden, p + "post_attention_layernorm.weight");
    check_tensor(weights, l.gate_proj, inter * hidden, p + "mlp.gate_proj.weight");
    check_tensor(weights, l.up_proj, inter * hidden, p + "mlp.up_proj.weight");
    check_tensor(weights, l.down_proj, hidden * inter, p + "mlp.down_proj.weight");
  }
}

}  // namespace kvaudit::model
