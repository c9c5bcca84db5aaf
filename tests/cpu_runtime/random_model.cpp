// Seeded random decoders for the CPU backend's tests; see random_model.h.
#include "tests/cpu_runtime/random_model.h"

#include <cmath>
#include <cstddef>
#include <random>

#include "runners/model/bf16.h"

namespace kvaudit::cpu::testing {
namespace {

class Filler {
 public:
  Filler(std::uint64_t seed, bool bf16) : engine_(seed), bf16_(bf16) {}

  std::vector<float> normal(std::size_t count, double mean, double stddev) {
    std::normal_distribution<double> dist(mean, stddev);
    std::vector<float> out(count);
    for (float& v : out) {
      v = static_cast<float>(dist(engine_));
      if (bf16_) v = model::round_to_bf16(v);
    }
    return out;
  }

 private:
  std::mt19937_64 engine_;
  bool bf16_;
};

}  // namespace

model::ModelWeights make_random_model(const RandomModelSpec& spec) {
  model::ModelWeights w;
  model::ModelConfig& c = w.config;
  c.architecture = spec.attention_bias ? model::Architecture::qwen2 : model::Architecture::llama;
  c.architecture_name = "random-test-model";
  c.hidden_size = spec.hidden_size;
  c.intermediate_size = spec.intermediate_size;
  c.num_layers = spec.num_layers;
  c.num_heads = spec.num_heads;
  c.num_kv_heads = spec.num_kv_heads;
  c.head_dim = spec.head_dim;
  c.vocab_size = spec.vocab_size;
  c.rms_norm_eps = 1e-5;
  c.rope.theta = 10000.0;
  if (spec.llama3_rope) {
    // Small original context so the three llama3 bands all occur for a small head_dim.
    c.rope.theta = 500000.0;
    c.rope.scaling = model::RopeScalingType::llama3;
    c.rope.factor = 8.0;
    c.rope.low_freq_factor = 1.0;
    c.rope.high_freq_factor = 4.0;
    c.rope.original_max_position_embeddings = 64;
  }
  c.max_position_embeddings = 4096;
  c.attention_bias = spec.attention_bias;
  c.tie_word_embeddings = spec.tie_word_embeddings;
  c.dtype = spec.dtype;
  w.source = "random-test-model(seed=" + std::to_string(spec.seed) + ")";

  Filler fill(spec.seed, spec.dtype == model::ComputeDtype::bf16);
  const std::size_t hidden = static_cast<std::size_t>(spec.hidden_size);
  const std::size_t inter = static_cast<std::size_t>(spec.intermediate_size);
  const std::size_t q_dim = static_cast<std::size_t>(spec.num_heads * spec.head_dim);
  const std::size_t kv_dim = static_cast<std::size_t>(spec.num_kv_heads * spec.head_dim);
  const std::size_t vocab = static_cast<std::size_t>(spec.vocab_size);
  const double in_hidden = 1.0 / std::sqrt(static_cast<double>(hidden));

  w.embed_tokens = fill.normal(vocab * hidden, 0.0, 1.0);
  for (int l = 0; l < spec.num_layers; ++l) {
    model::LayerWeights layer;
    layer.input_norm = fill.normal(hidden, 1.0, 0.1);
    // Queries and keys a little larger than 1/sqrt(in) so attention is far from uniform.
    layer.q_proj = fill.normal(q_dim * hidden, 0.0, 2.0 * in_hidden);
    layer.k_proj = fill.normal(kv_dim * hidden, 0.0, 2.0 * in_hidden);
    layer.v_proj = fill.normal(kv_dim * hidden, 0.0, in_hidden);
    if (spec.attention_bias) {
      layer.q_bias = fill.normal(q_dim, 0.0, 0.2);
      layer.k_bias = fill.normal(kv_dim, 0.0, 0.2);
      layer.v_bias = fill.normal(kv_dim, 0.0, 0.2);
    }
    layer.o_proj = fill.normal(hidden * q_dim, 0.0, 1.0 / std::sqrt(static_cast<double>(q_dim)));
    layer.post_attention_norm = fill.normal(hidden, 1.0, 0.1);
    layer.gate_proj = fill.normal(inter * hidden, 0.0, in_hidden);
    layer.up_proj = fill.normal(inter * hidden, 0.0, in_hidden);
    layer.down_proj = fill.normal(hidden * inter, 0.0, 1.0 / std::sqrt(static_cast<double>(inter)));
    w.layers.push_back(std::move(layer));
  }
  w.final_norm = fill.normal(hidden, 1.0, 0.1);
  if (!spec.tie_word_embeddings) w.lm_head = fill.normal(vocab * hidden, 0.0, in_hidden);
  return w;
}

std::vector<std::int32_t> random_tokens(int count, int vocab, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_int_distribution<std::int32_t> dist(0, vocab - 1);
  std::vector<std::int32_t> out(static_cast<std::size_t>(count));
  for (auto& t : out) t = dist(engine);
  return out;
}

}  // namespace kvaudit::cpu::testing
