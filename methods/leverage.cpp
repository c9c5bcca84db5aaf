// LeverageScorer (leverage.h).
#include "methods/leverage.h"

#include <Random123/philox.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <stdexcept>
#include <utility>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/non_causal_attention.h"

namespace kvaudit::methods {
namespace {

constexpr double kFirstJitter = 1e-2;  // kvpress chol_with_jitter(jitter=1e-2, max_tries=5)
constexpr int kJitterTries = 5;

// In place lower Cholesky factor of the symmetric [k, k] matrix `a`; false if not positive
// definite.
bool cholesky(std::vector<double>& a, std::size_t k) {
  for (std::size_t c = 0; c < k; ++c) {
    double diagonal = a[c * k + c];
    for (std::size_t t = 0; t < c; ++t) diagonal -= a[c * k + t] * a[c * k + t];
    if (!(diagonal > 0.0)) return false;
    const double root = std::sqrt(diagonal);
    a[c * k + c] = root;
    for (std::size_t r = c + 1; r < k; ++r) {
      double v = a[r * k + c];
      for (std::size_t t = 0; t < c; ++t) v -= a[r * k + t] * a[c * k + t];
      a[r * k + c] = v / root;
    }
  }
  return true;
}

}  // namespace

std::vector<float> draw_sketch(const LayerCapture& layer, int sketch_dimension,
                               const SelectionContext& context) {
  const std::size_t d = to_size(layer.head_dim);
  const std::size_t k = to_size(sketch_dimension);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(sketch_dimension)));
  r123::Philox4x32 philox;
  const r123::Philox4x32::key_type key = {{static_cast<std::uint32_t>(context.seed & 0xffffffffu),
                                           static_cast<std::uint32_t>(context.seed >> 32)}};
  std::vector<float> sketch(to_size(layer.num_kv_heads) * d * k);
  for (std::size_t h = 0; h < to_size(layer.num_kv_heads); ++h) {
    for (std::size_t e = 0; e < d * k; ++e) {
      const r123::Philox4x32::ctr_type counter = {
          {static_cast<std::uint32_t>(e),
           (static_cast<std::uint32_t>(layer.layer) << 16) | 0x8000u |
               static_cast<std::uint32_t>(h),
           static_cast<std::uint32_t>(context.cell_key & 0xffffffffu),
           static_cast<std::uint32_t>(context.cell_key >> 32)}};
      const auto block = philox(counter, key);
      const double u1 = static_cast<double>((block[0] >> 8) + 1u) * 0x1.0p-24;
      const double u2 = static_cast<double>(block[1] >> 8) * 0x1.0p-24;
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
      sketch[h * d * k + e] = maybe_bf16(static_cast<float>(z) * scale, layer.model_is_bf16);
    }
  }
  return sketch;
}

std::vector<float> leverage_scores(const LayerCapture& layer, int first, int count,
                                   std::span<const float> sketch, int sketch_dimension) {
  const std::size_t n = to_size(count);
  const std::size_t L = to_size(layer.length);
  const std::size_t d = to_size(layer.head_dim);
  const std::size_t k = to_size(sketch_dimension);
  const bool bf16 = layer.model_is_bf16;
  if (sketch.size() != to_size(layer.num_kv_heads) * d * k)
    throw std::invalid_argument("leverage: layer " + std::to_string(layer.layer) + ": sketch has " +
                                std::to_string(sketch.size()) +
                                " entries, expected [Hkv=" + std::to_string(layer.num_kv_heads) +
                                ", d=" + std::to_string(d) + ", k=" + std::to_string(k) + "]");
  std::vector<float> scores(to_size(layer.num_kv_heads) * n, 0.0f);
  if (n == 0) return scores;
  for (std::size_t h = 0; h < to_size(layer.num_kv_heads); ++h) {
    const float* keys = layer.keys_prerope.data() + (h * L + to_size(first)) * d;
    const float* phi = sketch.data() + h * d * k;
    // Sequence centring (the mean in the model dtype), then X = centred · Φ.
    std::vector<float> mean(d);
    for (std::size_t e = 0; e < d; ++e) {
      double sum = 0.0;
      for (std::size_t j = 0; j < n; ++j) sum += keys[j * d + e];
      mean[e] = maybe_bf16(static_cast<float>(sum / static_cast<double>(n)), bf16);
    }
    std::vector<double> x(n * k);
    std::vector<float> centred(d);
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t e = 0; e < d; ++e) centred[e] = maybe_bf16(keys[j * d + e] - mean[e], bf16);
      for (std::size_t t = 0; t < k; ++t) {
        float acc = 0.0f;  // fp32 accumulation, as the matmul
        for (std::size_t e = 0; e < d; ++e) acc += centred[e] * phi[e * k + t];
        x[j * k + t] = static_cast<double>(maybe_bf16(acc, bf16));
      }
    }
    std::vector<double> gram(k * k, 0.0);
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t a = 0; a < k; ++a)
        for (std::size_t b = 0; b <= a; ++b) gram[a * k + b] += x[j * k + a] * x[j * k + b];
    for (std::size_t a = 0; a < k; ++a)
      for (std::size_t b = 0; b < a; ++b) gram[b * k + a] = gram[a * k + b];
    std::vector<double> factor;
    double jitter = kFirstJitter;
    bool factored = false;
    for (int attempt = 0; attempt < kJitterTries && !factored; ++attempt) {
      factor = gram;
      for (std::size_t a = 0; a < k; ++a) factor[a * k + a] += jitter;
      factored = cholesky(factor, k);
      if (!factored) jitter *= 10.0;
    }
    if (!factored)
      throw std::invalid_argument("leverage: layer " + std::to_string(layer.layer) +
                                  ": the sketched Gram matrix is not positive definite");
    // ℓ(j) = ‖F⁻¹ x_j‖² with F the Cholesky factor.
    std::vector<double> y(k);
    for (std::size_t j = 0; j < n; ++j) {
      double total = 0.0;
      for (std::size_t a = 0; a < k; ++a) {
        double v = x[j * k + a];
        for (std::size_t b = 0; b < a; ++b) v -= factor[a * k + b] * y[b];
        y[a] = v / factor[a * k + a];
        total += y[a] * y[a];
      }
      scores[h * n + j] = static_cast<float>(std::max(total, 0.0));
    }
  }
  return scores;
}

LeverageScorer::LeverageScorer(LeverageParams params, SketchSource injected_sketch)
    : params_(params), injected_sketch_(std::move(injected_sketch)) {
  if (params_.sketch_dimension < 1)
    throw std::invalid_argument("leverage: sketch_dimension must be >= 1");
}

void LeverageScorer::score(const LayerCapture& layer, const SelectionContext& context,
                           std::span<float> scores) const {
  check_all_queries(layer, name());
  const std::vector<float> sketch = injected_sketch_
                                        ? injected_sketch_(layer)
                                        : draw_sketch(layer, params_.sketch_dimension, context);
  std::vector<float> s = leverage_scores(layer, 0, layer.length, sketch, params_.sketch_dimension);
  z_normalize(s);
  std::copy(s.begin(), s.end(), scores.begin());
}

}  // namespace kvaudit::methods
