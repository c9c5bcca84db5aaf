// RoPE inverse frequencies and cos/sin tables; see rope_tables.h.
#include "runners/model/rope_tables.h"

#include <cmath>
#include <cstddef>
#include <numbers>
#include <stdexcept>
#include <string>

namespace kvaudit::model {
namespace {

// HF default: `1.0 / (base ** (arange(0, dim, 2).float() / dim))` in fp32. θ^e is evaluated in
// double and rounded once (the correctly rounded fp32 power that PyTorch's fp32 pow approximates).
std::vector<float> default_inv_freq(double theta, int head_dim) {
  const float base = static_cast<float>(theta);
  std::vector<float> inv_freq(static_cast<std::size_t>(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(base), exponent));
    inv_freq[static_cast<std::size_t>(i)] = 1.0f / power;
  }
  return inv_freq;
}

// HF `_compute_llama3_parameters`, each tensor op as one fp32 operation.
void apply_llama3_scaling(const RopeConfig& rope, std::vector<float>& inv_freq) {
  const float factor = static_cast<float>(rope.factor);
  const float low_freq_factor = static_cast<float>(rope.low_freq_factor);
  const float old_context_len = static_cast<float>(rope.original_max_position_embeddings);
  // Python-float (double) scalars, compared against / combined with fp32 tensors.
  const double low_freq_wavelen =
      static_cast<double>(rope.original_max_position_embeddings) / rope.low_freq_factor;
  const double high_freq_wavelen =
      static_cast<double>(rope.original_max_position_embeddings) / rope.high_freq_factor;
  const float factor_span = static_cast<float>(rope.high_freq_factor - rope.low_freq_factor);
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  for (float& f : inv_freq) {
    const float wavelen = (1.0f / f) * two_pi;  // 2π / inv_freq  ≡  inv_freq.reciprocal() * 2π
    const bool low_frequency = wavelen > static_cast<float>(low_freq_wavelen);
    const bool high_frequency = wavelen < static_cast<float>(high_freq_wavelen);
    const float scaled = low_frequency ? f / factor : f;  // inv_freq_llama after the first where
    if (!low_frequency && !high_frequency) {
      const float smooth = ((1.0f / wavelen) * old_context_len - low_freq_factor) / factor_span;
      const float first = ((1.0f - smooth) * scaled) / factor;
      const float second = smooth * scaled;
      f = first + second;
    } else {
      f = scaled;
    }
  }
}

}  // namespace

std::vector<float> rope_inv_freq(const RopeConfig& rope, int head_dim) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw std::invalid_argument("rope_inv_freq: head_dim must be positive and even, got " +
                                std::to_string(head_dim));
  }
  if (!(rope.theta > 0.0)) {
    throw std::invalid_argument("rope_inv_freq: rope theta must be positive, got " +
                                std::to_string(rope.theta));
  }
  std::vector<float> inv_freq = default_inv_freq(rope.theta, head_dim);
  if (rope.scaling == RopeScalingType::llama3) {
    if (!(rope.factor > 0.0) || !(rope.high_freq_factor > rope.low_freq_factor) ||
        !(rope.low_freq_factor > 0.0) || rope.original_max_position_embeddings <= 0) {
      throw std::invalid_argument(
          "rope_inv_freq: llama3 scaling needs factor > 0, high_freq_factor > low_freq_factor > 0 "
          "and original_max_position_embeddings > 0");
    }
    apply_llama3_scaling(rope, inv_freq);
  }
  return inv_freq;
}

void rope_cos_sin(std::span<const float> inv_freq, std::span<const std::int32_t> positions,
                  Rounding rounding, std::span<float> cos, std::span<float> sin) {
  const std::size_t half = inv_freq.size();
  const std::size_t head_dim = 2 * half;
  if (cos.size() != positions.size() * head_dim || sin.size() != cos.size()) {
    throw std::invalid_argument("rope_cos_sin: cos/sin have " + std::to_string(cos.size()) + "/" +
                                std::to_string(sin.size()) + " elements, expected " +
                                std::to_string(positions.size() * head_dim));
  }
  for (std::size_t t = 0; t < positions.size(); ++t) {
    const float position = static_cast<float>(positions[t]);
    for (std::size_t i = 0; i < half; ++i) {
      const double freq = static_cast<double>(position * inv_freq[i]);  // fp32 product
      const float c = round_as(rounding, static_cast<float>(std::cos(freq)));
      const float s = round_as(rounding, static_cast<float>(std::sin(freq)));
      cos[t * head_dim + i] = c;
      cos[t * head_dim + half + i] = c;
      sin[t * head_dim + i] = s;
      sin[t * head_dim + half + i] = s;
    }
  }
}

}  // namespace kvaudit::model
