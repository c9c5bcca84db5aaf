// ComposedMethod (composed.h).
#include "methods/composed.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/capture_subset.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"
#include "methods/wrapper_budgets.h"

namespace kvaudit::methods {

ComposedMethod::ComposedMethod(std::vector<std::shared_ptr<const Scorer>> presses,
                               std::vector<double> compression_ratios)
    : presses_(std::move(presses)), compression_ratios_(std::move(compression_ratios)) {
  if (presses_.empty()) throw std::invalid_argument("composed: no presses");
  if (presses_.size() != compression_ratios_.size())
    throw std::invalid_argument("composed: " + std::to_string(presses_.size()) + " presses but " +
                                std::to_string(compression_ratios_.size()) +
                                " compression ratios (one per press)");
  for (std::size_t i = 0; i < presses_.size(); ++i) {
    if (!presses_[i]) throw std::invalid_argument("composed: null press");
    if (!(compression_ratios_[i] >= 0.0 && compression_ratios_[i] < 1.0))
      throw std::invalid_argument("composed: every compression ratio must be in [0, 1)");
    if (i > 0 && !reads_only_subset_fields(*presses_[i]))
      throw std::invalid_argument(
          "composed: press " + std::to_string(i + 1) + " '" + presses_[i]->name() +
          "' reads attention column sums, query moments or all-queries rows of the full "
          "prefill, which do not describe the cache an earlier press pruned; put it first");
  }
}

int ComposedMethod::window_needed() const {
  int window = 0;
  for (const auto& p : presses_) window = std::max(window, p->window_needed());
  return window;
}
bool ComposedMethod::needs_column_sums() const {
  return std::any_of(presses_.begin(), presses_.end(),
                     [](const auto& p) { return p->needs_column_sums(); });
}
bool ComposedMethod::needs_query_moments() const {
  return std::any_of(presses_.begin(), presses_.end(),
                     [](const auto& p) { return p->needs_query_moments(); });
}
bool ComposedMethod::needs_all_queries() const {
  return std::any_of(presses_.begin(), presses_.end(),
                     [](const auto& p) { return p->needs_all_queries(); });
}
std::string ComposedMethod::name() const {
  std::string names;
  for (const auto& p : presses_) names += (names.empty() ? "" : ", ") + p->name();
  return "composed(" + names + ")";
}

Selection ComposedMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                 const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  check_fixed_compression(name(), composed_compression(compression_ratios_), budget.compression);
  SelectionContext subset_context = context;
  subset_context.memo = nullptr;  // scores of a pruned cache are not the layer's scores
  Selection selection;
  for (const auto& layer : layers) {
    const auto heads = static_cast<std::size_t>(layer.num_kv_heads);
    // positions[h][i]: the original position at cache index i of head h.
    std::vector<std::vector<std::int32_t>> positions = position_range(layer, 0, L);
    bool pruned = false;
    for (std::size_t p = 0; p < presses_.size(); ++p) {
      const double ratio = compression_ratios_[p];
      if (ratio == 0.0) continue;
      const Budget press_budget{.compression = ratio, .threshold = budget.threshold};
      const auto length = positions.front().size();
      std::vector<float> scores;
      if (!pruned) {
        scores = score_layer(*presses_[p], layer, press_budget, context);
      } else {
        const CaptureSubset cache(layer, positions);
        scores.resize(heads * length);
        presses_[p]->score_for_budget(cache.view(), press_budget, subset_context, scores);
      }
      const std::int64_t n_kept = kept_count(static_cast<std::int64_t>(length), ratio);
      std::vector<std::vector<std::int32_t>> next(heads);
      for (std::size_t h = 0; h < heads; ++h)
        for (const auto i :
             torch_top_k_ranked(std::span<const float>(scores).subspan(h * length, length), n_kept))
          next[h].push_back(positions[h][static_cast<std::size_t>(i)]);
      positions = std::move(next);
      pruned = true;
    }
    for (auto& head : positions) std::sort(head.begin(), head.end());
    selection.kept.push_back(std::move(positions));
  }
  return selection;
}

}  // namespace kvaudit::methods
