// An independent, naive double-precision forward pass of a Llama/Qwen2 decoder, written directly
// from the HF formulas (docs/design/numerics.md) without any code of runners/cpu: the
// oracle the CPU backend's f32 results are compared with. Attention is a dense softmax over every
// earlier position with an optional key filter, so evictions are modelled by masking instead of
// compaction.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "runners/model/model_weights.h"

namespace kvaudit::cpu::testing {

// Whether query position q may see key position k (k ≤ q is already required) in (layer, kv_head).
using KeyFilter = std::function<bool(int layer, int kv_head, int query_position, int key_position)>;

// HF inv_freq in double: 1/θ^(2i/d), then llama3 scaling if configured (formula of
// `_compute_llama3_parameters`, evaluated in double).
std::vector<double> reference_inv_freq(const model::RopeConfig& rope, int head_dim);

// Logits [T][vocab] for every position of `tokens` (positions 0..T−1). filter may be empty.
std::vector<std::vector<double>> reference_logits(const model::ModelWeights& weights,
                                                  std::span<const std::int32_t> tokens,
                                                  const KeyFilter& filter = {});

}  // namespace kvaudit::cpu::testing
