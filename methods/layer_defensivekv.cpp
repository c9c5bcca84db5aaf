// Layer-DefensiveKV selection (layer_defensivekv.h): one top-N_tot over every layer's flattened
// defensive scores, N_tot = int(L·(1 − cr)·Hkv·n_layers), layer budgets = counts per layer.
// Source: FFY0/DefensiveKV @9251b95, efficient_ada_global_scorer_press.py l.44–200; Feng et al.
// 2025, arXiv 2510.13334. Quirks reproduced: raw cross-layer comparison, layer-local protection
// value M, budgets of 0 allowed; the scores' own quirks are listed in defensive_scoring.h.
#include "methods/layer_defensivekv.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "base/size_cast.h"
#include "methods/capture_checks.h"
#include "methods/defensive_scoring.h"
#include "methods/top_k.h"

namespace kvaudit::methods {
namespace {

// Every layer's flattened scores concatenated, layer-major.
std::vector<float> all_layer_scores(std::span<const LayerCapture> layers, int window,
                                    double compression, const std::string& method) {
  std::vector<float> all;
  for (const auto& layer : layers) {
    const auto scored = score_defensive_layer(layer, window, compression, method);
    all.insert(all.end(), scored.scores.begin(), scored.scores.end());
  }
  return all;
}

// The global choice: every layer's flattened scores concatenated (layer-major) and B_ℓ, the
// number of the top N_tot entries falling in each layer. cr must be > 0.
struct GlobalChoice {
  std::vector<float> scores;
  std::vector<std::int64_t> counts;
};

GlobalChoice choose_globally(std::span<const LayerCapture> layers, int window, double compression,
                             const std::string& method) {
  if (static_cast<std::size_t>(layers[0].num_layers) != layers.size())
    throw std::invalid_argument(method + ": the cross-layer budget needs every layer: got " +
                                std::to_string(layers.size()) +
                                " layer captures but num_layers is " +
                                std::to_string(layers[0].num_layers));
  GlobalChoice choice;
  choice.scores = all_layer_scores(layers, window, compression, method);
  const int length = layers[0].length;
  const int num_kv_heads = layers[0].num_kv_heads;
  const std::int64_t per_layer = static_cast<std::int64_t>(num_kv_heads) * length;
  // Python: int(q_len * (1 - cr) * num_key_value_heads * num_hidden_layers), left to right.
  const auto n_total =
      static_cast<std::int64_t>(std::trunc(static_cast<double>(length) * (1.0 - compression) *
                                           num_kv_heads * static_cast<double>(layers.size())));
  choice.counts.assign(layers.size(), 0);
  for (const std::int64_t flat : top_k_ranked(choice.scores, n_total))
    ++choice.counts[to_size(flat / per_layer)];
  return choice;
}

// cr = 0: the original returns the cache unchanged; the capture is still validated.
void check_uncompressed(std::span<const LayerCapture> layers, int window,
                        const std::string& method) {
  for (const auto& layer : layers) {
    check_window(layer, window, method);
    check_o_proj(layer, method);
  }
}

}  // namespace

LayerDefensiveKvMethod::LayerDefensiveKvMethod(int window) : window_(window) {
  if (window < 1)
    throw std::invalid_argument("layer_defensivekv: window must be >= 1, got " +
                                std::to_string(window));
}

std::vector<std::int64_t> LayerDefensiveKvMethod::layer_budgets(
    std::span<const LayerCapture> layers, const Budget& budget) const {
  const int length = check_layers(layers, name());
  check_defensive_compression(budget.compression, name());
  if (budget.compression == 0.0) {
    check_uncompressed(layers, window_, name());
    return std::vector<std::int64_t>(layers.size(),
                                     static_cast<std::int64_t>(layers[0].num_kv_heads) * length);
  }
  return choose_globally(layers, window_, budget.compression, name()).counts;
}

Selection LayerDefensiveKvMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                         const SelectionContext& context) const {
  (void)context;
  const int length = check_layers(layers, name());
  check_defensive_compression(budget.compression, name());
  const int num_kv_heads = layers[0].num_kv_heads;
  Selection selection;
  if (budget.compression == 0.0) {
    check_uncompressed(layers, window_, name());
    std::vector<std::int32_t> all(static_cast<std::size_t>(length));
    std::iota(all.begin(), all.end(), 0);
    selection.kept.assign(layers.size(), std::vector<std::vector<std::int32_t>>(
                                             static_cast<std::size_t>(num_kv_heads), all));
    return selection;
  }
  const GlobalChoice choice = choose_globally(layers, window_, budget.compression, name());
  const std::int64_t per_layer = static_cast<std::int64_t>(num_kv_heads) * length;
  // Intra-layer allocation: each layer keeps its top B_ℓ (layer_compress).
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const std::span<const float> layer_scores(choice.scores.data() + l * to_size(per_layer),
                                              to_size(per_layer));
    selection.kept.push_back(
        split_flat_top_k(layer_scores, num_kv_heads, length, choice.counts[l]));
  }
  return selection;
}

}  // namespace kvaudit::methods
