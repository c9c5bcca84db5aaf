// SnapKvScorer (snapkv.h).
#include "methods/snapkv.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/top_k.h"
#include "methods/window_attention.h"

namespace kvaudit::methods {

std::vector<float> pool_scores(std::span<const float> row, int kernel_size, Pooling pooling,
                               bool bf16) {
  const auto n = static_cast<std::ptrdiff_t>(row.size());
  const std::ptrdiff_t pad = kernel_size / 2;
  std::vector<float> out(row.size());
  for (std::ptrdiff_t j = 0; j < n; ++j) {
    const std::ptrdiff_t lo = std::max<std::ptrdiff_t>(0, j - pad);
    const std::ptrdiff_t hi = std::min<std::ptrdiff_t>(n - 1, j + pad);
    if (pooling == Pooling::avg) {
      double sum = 0.0;
      for (std::ptrdiff_t t = lo; t <= hi; ++t) sum += row[static_cast<std::size_t>(t)];
      out[static_cast<std::size_t>(j)] =
          maybe_bf16(static_cast<float>(sum / static_cast<double>(kernel_size)), bf16);
    } else {
      float m = row[static_cast<std::size_t>(lo)];
      for (std::ptrdiff_t t = lo + 1; t <= hi; ++t)
        m = std::max(m, row[static_cast<std::size_t>(t)]);
      out[static_cast<std::size_t>(j)] = m;
    }
  }
  return out;
}

SnapKvScorer::SnapKvScorer(SnapKvParams params) : params_(params) {
  if (params_.window < 1) throw std::invalid_argument("snapkv: window must be >= 1");
  if (params_.kernel_size < 1 || params_.kernel_size % 2 == 0)
    throw std::invalid_argument("snapkv: kernel_size must be odd and >= 1");
}

void SnapKvScorer::score(const LayerCapture& layer, const SelectionContext&,
                         std::span<float> scores) const {
  check_window(layer, params_.window, name());
  const int w = params_.window;
  const auto L = static_cast<std::size_t>(layer.length);
  const auto P = L - static_cast<std::size_t>(w);  // scored prefix
  const auto g = static_cast<std::size_t>(layer.group_size());
  const bool bf16 = layer.model_is_bf16;
  const auto attn = window_attention(layer, w);
  const bool original = params_.variant == SnapKvVariant::original;

  // Window aggregate per query head: mean (kvpress) or sum (original) over the w rows.
  std::vector<std::vector<float>> per_head(static_cast<std::size_t>(layer.num_heads));
  for (std::size_t h = 0; h < per_head.size(); ++h) {
    std::vector<float> agg(P);
    for (std::size_t j = 0; j < P; ++j) {
      double sum = 0.0;
      for (std::size_t r = 0; r < static_cast<std::size_t>(w); ++r)
        sum += attn[(h * static_cast<std::size_t>(w) + r) * L + j];
      agg[j] = maybe_bf16(static_cast<float>(original ? sum : sum / w), bf16);
    }
    per_head[h] =
        original ? std::move(agg) : pool_scores(agg, params_.kernel_size, params_.pooling, bf16);
  }
  for (std::size_t kv = 0; kv < static_cast<std::size_t>(layer.num_kv_heads); ++kv) {
    std::vector<float> group(P);
    for (std::size_t j = 0; j < P; ++j) {
      double sum = 0.0;
      for (std::size_t m = 0; m < g; ++m) sum += per_head[kv * g + m][j];
      group[j] = maybe_bf16(static_cast<float>(sum / static_cast<double>(g)), bf16);
    }
    if (original) group = pool_scores(group, params_.kernel_size, params_.pooling, bf16);
    std::copy(group.begin(), group.end(), scores.begin() + static_cast<std::ptrdiff_t>(kv * L));
  }
  protect_with_max_plus_one(scores, layer.length, layer.length - w, layer.length);
  if (bf16)
    for (float& s : scores) s = round_to_bf16(s);
}

}  // namespace kvaudit::methods
