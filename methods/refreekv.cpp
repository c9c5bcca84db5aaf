// ReFreeKV (refreekv.h): threshold on the relative L2-norm loss of the last prompt token's
// attention, ρ_j = mean_h sqrt(Σ_{rank ≥ j} a_h²), j* = max{j : (base − ρ_j)/base ≤ T}, keep the
// P − j* best-ranked prefix tokens per head plus the window. Source: Patrick-Ni/ReFreeKV @cc68486,
// evict_utils.py `H2OKVCluster.update_kv`, dynamic_metrics.py `last_token_attn`; arXiv 2502.16886.
// Quirks reproduced (see refreekv.h): largest j with ratio ≤ T; same count per head; ≥ 1 prefix
// token survives; GQA ranking summed over the group (stated deviation).
#include "methods/refreekv.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>

#include "base/size_cast.h"
#include "methods/capture_checks.h"
#include "methods/top_k.h"
#include "methods/window_attention.h"

namespace kvaudit::methods {
namespace {

const std::string kName = "refreekv";

void check_refreekv_threshold(double threshold) {
  if (!std::isfinite(threshold) || threshold < 0.0)
    throw std::invalid_argument(
        "refreekv: budget threshold T = " + std::to_string(threshold) +
        " must be finite and >= 0 (the original's negative T, random eviction, is not supported)");
}

}  // namespace

ReFreeKvLayerCut refreekv_layer_cut(const LayerCapture& layer, int window, double threshold) {
  check_refreekv_threshold(threshold);
  check_window(layer, window, kName);
  const std::size_t H = to_size(layer.num_heads);
  const std::size_t Hkv = to_size(layer.num_kv_heads);
  const std::size_t G = to_size(layer.group_size());
  const std::size_t L = to_size(layer.length);
  const std::size_t w = to_size(window);
  const std::size_t P = L - w;
  const std::vector<float> attn = window_attention(layer, window);  // [H, w, L]

  // 1. Ranking per KV head, least important first.
  std::vector<std::vector<std::int64_t>> ascending(Hkv);
  for (std::size_t k = 0; k < Hkv; ++k) {
    std::vector<double> sum(P, 0.0);
    for (std::size_t g = 0; g < G; ++g)
      for (std::size_t i = 0; i < w; ++i) {
        const float* row = attn.data() + ((k * G + g) * w + i) * L;
        for (std::size_t j = 0; j < P; ++j) sum[j] += row[j];
      }
    const std::vector<float> ranking(sum.begin(), sum.end());
    auto best_first = top_k_ranked(ranking, static_cast<std::int64_t>(P));
    ascending[k].assign(best_first.rbegin(), best_first.rend());
  }

  // 2–3. Criterion: tail norms in ascending rank order, averaged over query heads.
  std::vector<double> rho(P, 0.0);
  double base = 0.0;
  std::vector<double> tail(P);
  for (std::size_t h = 0; h < H; ++h) {
    const float* last_row = attn.data() + (h * w + (w - 1)) * L;
    const auto& order = ascending[h / G];
    double running = 0.0;
    for (std::size_t t = P; t-- > 0;) {
      const double a = last_row[static_cast<std::size_t>(order[t])];
      running += a * a;
      tail[t] = running;
    }
    base += std::sqrt(tail[0]);  // ‖a_h‖₂ over the prefix (all ranks)
    for (std::size_t j = 0; j < P; ++j) rho[j] += std::sqrt(tail[j]);
  }
  base /= static_cast<double>(H);

  ReFreeKvLayerCut cut;
  cut.loss_ratio.resize(P);
  for (std::size_t j = 0; j < P; ++j) {
    cut.loss_ratio[j] = (base - rho[j] / static_cast<double>(H)) / base;
    // 4. Largest qualifying j (a NaN ratio, base = 0, never qualifies: keep everything).
    if (cut.loss_ratio[j] <= threshold) cut.cut = static_cast<std::int64_t>(j);
  }
  // 5. Keep ranks ≥ j* and the window.
  cut.kept_per_head = static_cast<std::int64_t>(P) - cut.cut + static_cast<std::int64_t>(w);
  cut.kept.resize(Hkv);
  for (std::size_t k = 0; k < Hkv; ++k) {
    auto& kept = cut.kept[k];
    for (std::size_t t = static_cast<std::size_t>(cut.cut); t < P; ++t)
      kept.push_back(static_cast<std::int32_t>(ascending[k][t]));
    std::sort(kept.begin(), kept.end());
    for (std::size_t j = P; j < L; ++j) kept.push_back(static_cast<std::int32_t>(j));
  }
  return cut;
}

ReFreeKvMethod::ReFreeKvMethod(int window) : window_(window) {
  if (window < 1)
    throw std::invalid_argument("refreekv: window must be >= 1, got " + std::to_string(window));
}

ReFreeKvOutcome ReFreeKvMethod::select_with_retention(std::span<const LayerCapture> layers,
                                                      double threshold) const {
  const int length = check_layers(layers, name());
  check_refreekv_threshold(threshold);
  ReFreeKvOutcome outcome;
  double retention_sum = 0.0;
  for (const auto& layer : layers) {
    ReFreeKvLayerCut cut = refreekv_layer_cut(layer, window_, threshold);
    outcome.cut_per_layer.push_back(cut.cut);
    retention_sum += static_cast<double>(cut.kept_per_head) / static_cast<double>(length);
    outcome.selection.kept.push_back(std::move(cut.kept));
  }
  outcome.realised_retention = retention_sum / static_cast<double>(layers.size());
  return outcome;
}

Selection ReFreeKvMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                 const SelectionContext& context) const {
  (void)context;
  return select_with_retention(layers, budget.threshold).selection;
}

}  // namespace kvaudit::methods
