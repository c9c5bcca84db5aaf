// RkvScorer (rkv.h).
#include "methods/rkv.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/top_k.h"

namespace kvaudit::methods {
namespace {

// softmax over `x` in fp32 semantics (computed in double, rounded once per output), as torch's
// softmax(dtype=float32) gives it up to the last bit.
std::vector<float> softmax(std::span<const float> x) {
  const float max = *std::max_element(x.begin(), x.end());
  std::vector<double> e(x.size());
  double sum = 0.0;
  for (std::size_t j = 0; j < x.size(); ++j) {
    e[j] = std::exp(static_cast<double>(x[j]) - static_cast<double>(max));
    sum += e[j];
  }
  std::vector<float> out(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) out[j] = static_cast<float>(e[j] / sum);
  return out;
}

double dot_exact(std::span<const float> a, std::span<const float> b) {
  double s = 0.0;
  for (std::size_t c = 0; c < a.size(); ++c)
    s += static_cast<double>(a[c]) * static_cast<double>(b[c]);
  return s;
}

}  // namespace

RkvScorer::RkvScorer(const RkvParams& params) : params_(params) {
  if (params_.window < 1) throw std::invalid_argument("rkv: window must be >= 1");
  if (params_.kernel_size < 1 || params_.kernel_size % 2 == 0)
    throw std::invalid_argument(
        "rkv: kernel_size must be odd and >= 1 (max_pool1d keeps the "
        "length only for odd kernels), got " +
        std::to_string(params_.kernel_size));
  if (!(params_.mix_lambda >= 0.0 && params_.mix_lambda <= 1.0))
    throw std::invalid_argument("rkv: mix_lambda must be in [0, 1]");
}

void RkvScorer::score(const LayerCapture& layer, const SelectionContext&,
                      std::span<float> scores) const {
  check_window(layer, params_.window, name());
  const bool bf16 = layer.model_is_bf16;
  const std::size_t L = static_cast<std::size_t>(layer.length);
  const std::size_t w = static_cast<std::size_t>(params_.window);
  const std::size_t n = L - w;  // scored candidates 0..n-1
  const std::size_t d = static_cast<std::size_t>(layer.head_dim);
  const std::size_t rows = static_cast<std::size_t>(layer.window_rows);
  const std::size_t group = static_cast<std::size_t>(layer.group_size());
  const float sqrt_d = static_cast<float>(std::sqrt(static_cast<double>(d)));
  const float lambda = static_cast<float>(params_.mix_lambda);
  const float one_minus_lambda = static_cast<float>(1.0 - params_.mix_lambda);
  const std::size_t half = static_cast<std::size_t>(params_.kernel_size / 2);

  for (std::size_t g = 0; g < static_cast<std::size_t>(layer.num_kv_heads); ++g) {
    const std::span<const float> keys = layer.keys[g];  // [L, d]
    auto key = [&](std::size_t j) { return keys.subspan(j * d, d); };

    // Importance: window rows are the last w of the captured rows.
    std::vector<float> mean(n, 0.0f);
    std::vector<float> logits(n);
    for (std::size_t r = 0; r < w; ++r) {
      const std::size_t row = rows - w + r;
      std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
      for (std::size_t hh = 0; hh < group; ++hh) {
        const std::size_t h = g * group + hh;
        const std::span<const float> q = layer.window_queries.subspan((h * rows + row) * d, d);
        for (std::size_t j = 0; j < n; ++j) {
          const float s = maybe_bf16(static_cast<float>(dot_exact(q, key(j))), bf16);
          logits[j] = std::max(logits[j], maybe_bf16(s / sqrt_d, bf16));
        }
      }
      const std::vector<float> p = softmax(logits);
      for (std::size_t j = 0; j < n; ++j) mean[j] += p[j];
    }
    std::vector<float> importance(n);
    for (std::size_t j = 0; j < n; ++j) mean[j] = maybe_bf16(mean[j] / static_cast<float>(w), bf16);
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t lo = j >= half ? j - half : 0;
      const std::size_t hi = std::min(n - 1, j + half);
      importance[j] = *std::max_element(mean.begin() + static_cast<std::ptrdiff_t>(lo),
                                        mean.begin() + static_cast<std::ptrdiff_t>(hi) + 1);
    }

    // Redundancy over all L keys.
    std::vector<float> unit(L * d);
    for (std::size_t j = 0; j < L; ++j) {
      const float norm = maybe_bf16(static_cast<float>(std::sqrt(dot_exact(key(j), key(j)))), bf16);
      const float denom = maybe_bf16(norm + 1e-8f, bf16);
      for (std::size_t c = 0; c < d; ++c) unit[j * d + c] = maybe_bf16(key(j)[c] / denom, bf16);
    }
    auto unit_key = [&](std::size_t j) { return std::span<const float>(unit).subspan(j * d, d); };
    const float threshold = static_cast<float>(params_.similarity_threshold);
    std::vector<double> column_sum(L, 0.0);
    std::vector<float> similarity(L);
    for (std::size_t i = 0; i < L; ++i) {
      std::size_t last_similar = 0;
      for (std::size_t j = 0; j < L; ++j) {
        similarity[j] =
            i == j ? 0.0f
                   : maybe_bf16(static_cast<float>(dot_exact(unit_key(i), unit_key(j))), bf16);
        if (similarity[j] > threshold) last_similar = j;
      }
      similarity[last_similar] = 0.0f;
      for (std::size_t j = 0; j < L; ++j) column_sum[j] += static_cast<double>(similarity[j]);
    }
    std::vector<float> column_mean(L);
    for (std::size_t j = 0; j < L; ++j)
      column_mean[j] = maybe_bf16(static_cast<float>(column_sum[j] / static_cast<double>(L)), bf16);
    std::vector<float> redundancy = softmax(column_mean);
    for (float& r : redundancy) r = maybe_bf16(r, bf16);

    const std::span<float> out = scores.subspan(g * L, L);
    for (std::size_t j = 0; j < n; ++j) {
      const float a = maybe_bf16(importance[j] * lambda, bf16);
      const float b = maybe_bf16(redundancy[j] * one_minus_lambda, bf16);
      out[j] = maybe_bf16(a - b, bf16);
    }
    for (std::size_t j = n; j < L; ++j) out[j] = 0.0f;  // set below
  }
  protect_with_max_plus_one(scores, layer.length, layer.length - params_.window, layer.length);
  if (bf16)
    for (float& s : scores) s = round_to_bf16(s);
}

}  // namespace kvaudit::methods
