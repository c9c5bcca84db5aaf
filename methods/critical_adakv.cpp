// CriticalAdaKvMethod (critical_adakv.h).
#include "methods/critical_adakv.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/criticalkv.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"

namespace kvaudit::methods {

std::vector<std::vector<std::int32_t>> critical_adakv_allocate(
    std::span<const float> scores, std::span<const float> norms, int num_kv_heads, int length,
    std::int64_t n_kept, double alpha, double epsilon, double first_stage_ratio) {
  constexpr float kMax = std::numeric_limits<float>::max();
  const auto L = static_cast<std::size_t>(length);
  const auto heads = static_cast<std::size_t>(num_kv_heads);
  std::vector<float> s(scores.begin(), scores.end());
  // Safeguard.
  auto n_safe = static_cast<std::int64_t>(std::floor(static_cast<double>(n_kept) * alpha));
  if (alpha > 0) n_safe = n_kept > 0 ? std::max<std::int64_t>(1, n_safe) : 0;
  for (std::size_t h = 0; h < heads; ++h) {
    const std::span<const float> head(s.data() + h * L, L);
    for (const auto j : torch_top_k_ranked(head, n_safe))
      s[h * L + static_cast<std::size_t>(j)] = kMax;
  }
  // Head budgets from the flattened layer.
  std::vector<std::int64_t> head_budget(heads, 0);
  for (const auto flat : torch_top_k_ranked(s, n_kept * num_kv_heads))
    ++head_budget[static_cast<std::size_t>(flat) / L];
  // Stage 1.
  std::vector<std::int64_t> first_stage(heads);
  for (std::size_t h = 0; h < heads; ++h)
    first_stage[h] =
        static_cast<std::int64_t>(static_cast<double>(head_budget[h]) * first_stage_ratio);
  const std::int64_t first_max = *std::max_element(first_stage.begin(), first_stage.end());
  for (std::size_t h = 0; h < heads; ++h) {
    const std::span<const float> head(s.data() + h * L, L);
    const auto ranked = torch_top_k_ranked(head, first_max);
    for (std::int64_t i = 0; i < first_stage[h]; ++i)
      s[h * L + static_cast<std::size_t>(ranked[static_cast<std::size_t>(i)])] = kMax;
  }
  // Stage 2.
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = (s[i] + static_cast<float>(epsilon)) * norms[i];
  const std::int64_t budget_max = *std::max_element(head_budget.begin(), head_budget.end());
  std::vector<std::vector<std::int32_t>> kept(heads);
  for (std::size_t h = 0; h < heads; ++h) {
    const std::span<const float> head(s.data() + h * L, L);
    const auto ranked = torch_top_k_ranked(head, budget_max);
    for (std::int64_t i = 0; i < head_budget[h]; ++i)
      kept[h].push_back(static_cast<std::int32_t>(ranked[static_cast<std::size_t>(i)]));
    std::sort(kept[h].begin(), kept[h].end());
  }
  return kept;
}

CriticalAdaKvMethod::CriticalAdaKvMethod(std::shared_ptr<const Scorer> scorer, double alpha,
                                         double epsilon, double first_stage_ratio)
    : ScorerWrapperMethod("critical_adakv", std::move(scorer)),
      alpha_(alpha),
      epsilon_(epsilon),
      first_stage_ratio_(first_stage_ratio) {
  if (!scorer_) throw std::invalid_argument("critical_adakv: null scorer");
  if (!(alpha >= 0.0 && alpha <= 1.0))
    throw std::invalid_argument("critical_adakv: alpha must be in [0, 1]");
  if (!(first_stage_ratio >= 0.0 && first_stage_ratio <= 1.0))
    throw std::invalid_argument("critical_adakv: first_stage_ratio must be in [0, 1]");
  if (!(epsilon >= 0.0)) throw std::invalid_argument("critical_adakv: epsilon must be >= 0");
}

Selection CriticalAdaKvMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                      const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  const std::int64_t n_kept = kept_count(L, budget.compression);
  Selection selection;
  for (const auto& layer : layers) {
    const auto scores = score_layer(*scorer_, layer, budget, context);
    const auto norms = projected_value_l1_norms(layer);
    selection.kept.push_back(critical_adakv_allocate(scores, norms, layer.num_kv_heads, L, n_kept,
                                                     alpha_, epsilon_, first_stage_ratio_));
  }
  return selection;
}

}  // namespace kvaudit::methods
