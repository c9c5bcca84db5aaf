// RoPE inverse frequencies, cos/sin tables and the rotate-half application; see rope.h.
#include "runners/cpu/rope.h"

#include <cmath>
#include <cstddef>
#include <numbers>
#include <stdexcept>
#include <string>

#include "runners/cpu/shape_check.h"

namespace kvaudit::cpu {
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
void apply_llama3_scaling(const model::RopeConfig& rope, std::vector<float>& inv_freq) {
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

std::vector<float> rope_inv_freq(const model::RopeConfig& rope, int head_dim) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw std::invalid_argument("rope_inv_freq: head_dim must be positive and even, got " +
                                std::to_string(head_dim));
  }
  if (!(rope.theta > 0.0)) {
    throw std::invalid_argument("rope_inv_freq: rope theta must be positive, got " +
                                std::to_string(rope.theta));
  }
  std::vector<float> inv_freq = default_inv_freq(rope.theta, head_dim);
  if (rope.scaling == model::RopeScalingType::llama3) {
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
  require_size(cos, positions.size() * head_dim, "rope_cos_sin: cos");
  require_size(sin, positions.size() * head_dim, "rope_cos_sin: sin");
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

void apply_rope(std::span<float> x, int num_heads, int head_dim, std::span<const float> cos,
                std::span<const float> sin, Rounding rounding) {
  const std::size_t d = static_cast<std::size_t>(head_dim);
  const std::size_t half = d / 2;
  const std::size_t rows = cos.size() / (d == 0 ? 1 : d);
  require_size(sin, cos.size(), "apply_rope: sin");
  require_size(x, rows * static_cast<std::size_t>(num_heads) * d, "apply_rope: x");
  const std::ptrdiff_t vectors = static_cast<std::ptrdiff_t>(rows) * num_heads;
#pragma omp parallel for schedule(static) if (x.size() > (1u << 16))
  for (std::ptrdiff_t v = 0; v < vectors; ++v) {
    const std::size_t t = static_cast<std::size_t>(v) / static_cast<std::size_t>(num_heads);
    float* xv = x.data() + static_cast<std::size_t>(v) * d;
    const float* c = cos.data() + t * d;
    const float* s = sin.data() + t * d;
    for (std::size_t i = 0; i < half; ++i) {
      const float first = xv[i];
      const float second = xv[i + half];
      // out[i]        = x[i]·cos[i]        + (−x[i+half])·sin[i]
      // out[i + half] = x[i+half]·cos[i+half] + x[i]·sin[i+half]
      const float a = round_as(rounding, first * c[i]);
      const float b = round_as(rounding, -second * s[i]);
      const float e = round_as(rounding, second * c[i + half]);
      const float f = round_as(rounding, first * s[i + half]);
      xv[i] = round_as(rounding, a + b);
      xv[i + half] = round_as(rounding, e + f);
    }
  }
}

}  // namespace kvaudit::cpu
