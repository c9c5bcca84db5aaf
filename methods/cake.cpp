// CakeMethod (cake.h).
#include "methods/cake.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/layer_budgets.h"
#include "methods/snapkv.h"
#include "methods/window_attention.h"

namespace kvaudit::methods {
namespace {

void check_cake_params(const CakeParams& params) {
  if (params.window < 2)
    throw std::invalid_argument("cake: window must be >= 2 (the variance over the window rows)");
  if (params.kernel_size < 1 || params.kernel_size % 2 == 0)
    throw std::invalid_argument("cake: kernel_size must be odd and >= 1");
  if (!(params.tau1 > 0.0) || !(params.tau2 > 0.0))
    throw std::invalid_argument("cake: tau1 and tau2 must be > 0");
  if (!(params.gamma >= 0.0)) throw std::invalid_argument("cake: gamma must be >= 0");
}

}  // namespace

CakeLayerStatistics cake_layer_statistics(const LayerCapture& layer, const CakeParams& params) {
  check_cake_params(params);
  check_window(layer, params.window, "cake");
  const std::size_t w = to_size(params.window);
  const std::size_t L = to_size(layer.length);
  const std::size_t P = L - w;
  const std::size_t heads = to_size(layer.num_heads);
  const std::size_t group = to_size(layer.group_size());
  const bool bf16 = layer.model_is_bf16;
  const auto attention = window_attention(layer, params.window);  // [H, w, L]
  const auto at = [&](std::size_t h, std::size_t r, std::size_t j) {
    return attention[(h * w + r) * L + j];
  };

  CakeLayerStatistics stats;
  double dispersion = 0.0;
  std::vector<double> shift_per_position(P, 0.0);  // Σ_h var, per j
  std::vector<std::vector<float>> pooled(heads);   // per query head, [P]
  std::vector<float> indicator_row(P);
  for (std::size_t h = 0; h < heads; ++h) {
    for (std::size_t j = 0; j < P; ++j) {
      double sum = 0.0;
      for (std::size_t r = 0; r < w; ++r) {
        const float a = at(h, r, j);
        sum += a;
        // torch: a·log(a + 1e-10) on fp32 probabilities.
        const float shifted = a + 1e-10f;
        dispersion -= static_cast<double>(a) * std::log(static_cast<double>(shifted));
      }
      const double mean = sum / static_cast<double>(w);
      double squares = 0.0;
      for (std::size_t r = 0; r < w; ++r) {
        const double d = static_cast<double>(at(h, r, j)) - mean;
        squares += d * d;
      }
      const float variance =
          maybe_bf16(static_cast<float>(squares / static_cast<double>(w - 1)), bf16);
      shift_per_position[j] += static_cast<double>(variance);
      const float mean_value = maybe_bf16(static_cast<float>(mean), bf16);
      const float weighted = maybe_bf16(static_cast<float>(params.gamma) * variance, bf16);
      indicator_row[j] = maybe_bf16(mean_value + weighted, bf16);
    }
    pooled[h] = pool_scores(indicator_row, params.kernel_size, Pooling::avg, bf16);
  }
  double shift = 0.0;
  for (std::size_t j = 0; j < P; ++j) {
    shift += static_cast<double>(maybe_bf16(static_cast<float>(shift_per_position[j]), bf16));
  }
  stats.dispersion = static_cast<double>(static_cast<float>(dispersion));
  stats.shift = static_cast<double>(maybe_bf16(static_cast<float>(shift), bf16));
  const auto dispersion_term = static_cast<float>(std::pow(stats.dispersion, 1.0 / params.tau1));
  const float shift_term =
      maybe_bf16(static_cast<float>(std::pow(stats.shift, 1.0 / params.tau2)), bf16);
  stats.preference = static_cast<double>(dispersion_term * shift_term);

  const std::size_t kv_heads = to_size(layer.num_kv_heads);
  stats.indicator.assign(kv_heads * P, 0.0f);
  for (std::size_t g = 0; g < kv_heads; ++g) {
    for (std::size_t j = 0; j < P; ++j) {
      double sum = 0.0;
      for (std::size_t q = 0; q < group; ++q) sum += pooled[g * group + q][j];
      stats.indicator[g * P + j] =
          maybe_bf16(static_cast<float>(sum / static_cast<double>(group)), bf16);
    }
  }
  return stats;
}

std::vector<std::int64_t> cake_adjust_budgets(std::span<const double> raw, std::int64_t total,
                                              std::int64_t cap) {
  std::vector<std::int64_t> budgets(raw.size());
  for (std::size_t l = 0; l < raw.size(); ++l) {
    budgets[l] = static_cast<std::int64_t>(raw[l]);  // numpy astype(int): toward zero
  }
  // Cap at `cap` and spread the excess over the layers below it.
  std::int64_t excess = 0;
  for (auto& b : budgets) {
    excess += std::max<std::int64_t>(b - cap, 0);
    b = std::min(b, cap);
  }
  const auto spread = [&](const std::vector<std::size_t>& valid, std::int64_t amount, int sign) {
    const auto count = static_cast<std::int64_t>(valid.size());
    const std::int64_t each = amount / count;
    const std::int64_t remainder = amount % count;
    for (std::size_t k = 0; k < valid.size(); ++k) {
      budgets[valid[k]] += sign * (each + (static_cast<std::int64_t>(k) < remainder ? 1 : 0));
    }
  };
  if (excess > 0) {
    std::vector<std::size_t> valid;
    for (std::size_t l = 0; l < budgets.size(); ++l)
      if (budgets[l] < cap) valid.push_back(l);
    if (!valid.empty()) spread(valid, excess, +1);
  }
  // Make the sum `total`.
  const std::int64_t difference =
      total - std::accumulate(budgets.begin(), budgets.end(), std::int64_t{0});
  if (difference != 0) {
    std::vector<std::size_t> valid;
    for (std::size_t l = 0; l < budgets.size(); ++l)
      if (difference > 0 ? budgets[l] < cap : budgets[l] > 1) valid.push_back(l);
    if (!valid.empty()) spread(valid, std::abs(difference), difference > 0 ? +1 : -1);
  }
  return budgets;
}

std::vector<std::int64_t> cake_layer_budgets(std::span<const double> preferences,
                                             std::int64_t total, std::int64_t cap) {
  if (preferences.empty()) throw std::invalid_argument("cake: no layer");
  // The official arithmetic on numpy float32 scalars: s = ((0 + P_0) + P_1) + ..., then
  // raw_ℓ = float32(float32(P_ℓ / s) · total).
  float sum = 0.0f;
  bool usable = true;
  for (const double p : preferences) {
    if (!std::isfinite(p) || p < 0.0) usable = false;
    sum += static_cast<float>(p);
  }
  usable = usable && std::isfinite(sum) && sum > 0.0f;
  std::vector<double> raw(preferences.size());
  for (std::size_t l = 0; l < preferences.size(); ++l) {
    raw[l] = usable ? static_cast<double>(static_cast<float>(preferences[l]) / sum *
                                          static_cast<float>(total))
                    : static_cast<double>(total) / static_cast<double>(preferences.size());
  }
  return fit_layer_budgets(cake_adjust_budgets(raw, total, cap), total, 0, cap);
}

CakeMethod::CakeMethod(CakeParams params) : params_(params) { check_cake_params(params_); }

Selection CakeMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                             const SelectionContext&) const {
  const int L = check_layers(layers, name());
  const std::int64_t n_kept = kept_count(L, budget.compression);
  for (const auto& layer : layers) check_window(layer, params_.window, name());
  const int w = params_.window;
  const int P = L - w;
  Selection selection;
  if (n_kept <= w) {
    // No room beside the window: every layer keeps its n_kept most recent positions.
    for (const auto& layer : layers) {
      selection.kept.emplace_back(to_size(layer.num_kv_heads), [&] {
        std::vector<std::int32_t> recent;
        for (std::int64_t j = L - n_kept; j < L; ++j)
          recent.push_back(static_cast<std::int32_t>(j));
        return recent;
      }());
    }
    return selection;
  }
  std::vector<CakeLayerStatistics> stats;
  std::vector<double> preferences;
  for (const auto& layer : layers) {
    stats.push_back(cake_layer_statistics(layer, params_));
    preferences.push_back(stats.back().preference);
  }
  const auto n_layers = static_cast<std::int64_t>(layers.size());
  const auto budgets = cake_layer_budgets(preferences, n_layers * (n_kept - w), P);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    selection.kept.push_back(
        top_k_plus_window(stats[l].indicator, layers[l].num_kv_heads, P, L, budgets[l]));
  }
  return selection;
}

}  // namespace kvaudit::methods
