// Randomly initialised ModelWeights for the CPU backend's tests: small decoders whose shapes and
// flags (GQA ratio, q/k/v bias, tied embeddings, llama3 RoPE, bf16) are chosen by the test. Values
// are seeded (std::mt19937_64) so every run sees the same model.
#pragma once

#include <cstdint>
#include <vector>

#include "runners/model/model_weights.h"

namespace kvaudit::cpu::testing {

struct RandomModelSpec {
  int hidden_size = 48;
  int intermediate_size = 80;
  int num_layers = 2;
  int num_heads = 4;
  int num_kv_heads = 2;
  int head_dim = 12;
  int vocab_size = 97;
  bool attention_bias = false;
  bool tie_word_embeddings = false;
  bool llama3_rope = false;
  model::ComputeDtype dtype = model::ComputeDtype::f32;
  std::uint64_t seed = 1;
};

// Weights ~ N(0, 1/in_features) (bf16-rounded in bf16 mode), norms 1 + N(0, 0.1²), embeddings N(0,
// 1).
model::ModelWeights make_random_model(const RandomModelSpec& spec);

// `count` token ids uniform in [0, vocab).
std::vector<std::int32_t> random_tokens(int count, int vocab, std::uint64_t seed);

}  // namespace kvaudit::cpu::testing
