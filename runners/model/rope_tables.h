// Rotary position embedding tables, exactly as HF computes them (docs/design/numerics.md §RoPE;
// transformers src/transformers/modeling_rope_utils.py and models/llama/modeling_llama.py). Shared
// by both engines: the CPU backend applies them (runners/cpu/rope.h), the CUDA backend uploads
// them for its RoPE kernel.
//
// inv_freq (default):  inv_freq[i] = 1 / θ^(e_i),  e_i = fp32(2i) / fp32(d),  i ∈ [0, d/2), all
// fp32 inv_freq (llama3, `_compute_llama3_parameters`), with wavelen = 2π / inv_freq:
//   wavelen > old/low_freq_factor   → inv_freq / factor
//   wavelen < old/high_freq_factor  → inv_freq
//   otherwise (both bounds included): s = (old/wavelen − low) / (high − low),
//                                     inv_freq ← (1 − s)·inv_freq/factor + s·inv_freq
//   computed in fp32 step by step like PyTorch (`x / tensor` is `tensor.reciprocal() * x`).
// cos/sin: freq = fp32(position) · inv_freq (fp32), emb = [freq, freq]; cos(emb), sin(emb) in fp32
//   (precise: evaluated in double and rounded once, never fast-math) → [bf16].
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runners/model/model_config.h"
#include "runners/model/rounding.h"

namespace kvaudit::model {

// [head_dim / 2] inverse frequencies; throws std::invalid_argument for an odd or non-positive
// head_dim or a non-positive theta/factor.
std::vector<float> rope_inv_freq(const RopeConfig& rope, int head_dim);

// inv_freq [head_dim/2], positions [T] → cos [T, head_dim], sin [T, head_dim]. Throws
// std::invalid_argument when cos or sin has another size.
void rope_cos_sin(std::span<const float> inv_freq, std::span<const std::int32_t> positions,
                  Rounding rounding, std::span<float> cos, std::span<float> sin);

}  // namespace kvaudit::model
