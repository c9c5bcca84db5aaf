// AdaKvMethod (adakv.h).
#include "methods/adakv.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"

namespace kvaudit::methods {
std::vector<std::vector<std::int32_t>> adakv_allocate(std::span<const float> scores,
                                                      int num_kv_heads, int length,
                                                      std::int64_t n_kept, double alpha,
                                                      AdaKvVariant variant) {
  const auto L = static_cast<std::size_t>(length);
  const auto heads = static_cast<std::size_t>(num_kv_heads);
  std::vector<std::vector<std::int32_t>> kept(heads);
  if (variant == AdaKvVariant::kvpress) {
    // kvpress: reserve each head's n_safe best (float max), then mask the n_pruned lowest of the
    // flattened layer (torch.topk(−s, n_pruned), ties as torch's CPU topk: top_k.h).
    std::int64_t n_safe =
        static_cast<std::int64_t>(std::floor(static_cast<double>(n_kept) * alpha));
    if (alpha > 0) n_safe = std::max<std::int64_t>(1, n_safe);
    std::vector<float> negated(scores.begin(), scores.end());
    for (std::size_t h = 0; h < heads; ++h)
      for (const auto j : torch_top_k_ranked(scores.subspan(h * L, L), n_safe))
        negated[h * L + static_cast<std::size_t>(j)] = std::numeric_limits<float>::max();
    for (float& v : negated) v = -v;
    std::vector<char> pruned(scores.size(), 0);
    for (const auto flat : torch_top_k_ranked(
             negated, static_cast<std::int64_t>(heads) * (static_cast<std::int64_t>(L) - n_kept)))
      pruned[static_cast<std::size_t>(flat)] = 1;
    for (std::size_t i = 0; i < scores.size(); ++i)
      if (!pruned[i]) kept[i / L].push_back(static_cast<std::int32_t>(i % L));
    return kept;
  }
  // original: counts at the full budget, blended with the floor.
  std::vector<std::int64_t> counts(heads, 0);
  for (const auto flat : torch_top_k_ranked(scores, n_kept * num_kv_heads))
    ++counts[static_cast<std::size_t>(flat) / L];
  const double floor_part = std::floor(alpha * static_cast<double>(n_kept));
  for (std::size_t h = 0; h < heads; ++h) {
    const double blended = static_cast<double>(counts[h]) * (1.0 - alpha) + floor_part;
    const auto budget =
        std::clamp<std::int64_t>(static_cast<std::int64_t>(std::nearbyint(blended)), 1, length);
    kept[h] = torch_top_k_positions(scores.subspan(h * L, L), budget);
  }
  return kept;
}

AdaKvMethod::AdaKvMethod(std::shared_ptr<const Scorer> scorer, double alpha, AdaKvVariant variant)
    : ScorerWrapperMethod("adakv", std::move(scorer)), alpha_(alpha), variant_(variant) {
  if (!scorer_) throw std::invalid_argument("adakv: null scorer");
  if (!(alpha >= 0.0 && alpha <= 1.0))
    throw std::invalid_argument("adakv: alpha must be in [0, 1]");
}

Selection AdaKvMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                              const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  const std::int64_t n_kept = kept_count(L, budget.compression);
  Selection selection;
  for (const auto& layer : layers) {
    const auto scores = score_layer(*scorer_, layer, budget, context);
    selection.kept.push_back(
        adakv_allocate(scores, layer.num_kv_heads, L, n_kept, alpha_, variant_));
  }
  return selection;
}

}  // namespace kvaudit::methods
