// ScorerPress selection (scorer_method.h).
#include "methods/scorer_method.h"

#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/score_memo.h"
#include "methods/top_k.h"

namespace kvaudit::methods {

std::vector<float> score_layer(const Scorer& scorer, const LayerCapture& layer,
                               const Budget& budget, const SelectionContext& context) {
  check_capture_basics(layer, scorer.name());
  const auto compute = [&] {
    std::vector<float> scores(static_cast<std::size_t>(layer.num_kv_heads) *
                              static_cast<std::size_t>(layer.length));
    scorer.score_for_budget(layer, budget, context, scores);
    return scores;
  };
  if (context.memo != nullptr && !scorer.scores_depend_on_budget() &&
      !scorer.scores_depend_on_cell()) {
    return *context.memo->get_or_compute(scorer, layer, compute);
  }
  return compute();
}

std::vector<std::vector<std::int32_t>> per_head_top_k(std::span<const float> scores,
                                                      int num_kv_heads, int length,
                                                      std::int64_t n_kept) {
  std::vector<std::vector<std::int32_t>> kept(static_cast<std::size_t>(num_kv_heads));
  const auto l = static_cast<std::size_t>(length);
  for (int h = 0; h < num_kv_heads; ++h)
    kept[static_cast<std::size_t>(h)] =
        torch_top_k_positions(scores.subspan(static_cast<std::size_t>(h) * l, l), n_kept);
  return kept;
}

ScorerMethod::ScorerMethod(std::shared_ptr<const Scorer> scorer)
    : ScorerWrapperMethod("", std::move(scorer)) {
  if (!scorer_) throw std::invalid_argument("ScorerMethod: null scorer");
}

Selection ScorerMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                               const SelectionContext& context) const {
  const int length = check_layers(layers, name());
  const std::int64_t n_kept = kept_count(length, budget.compression);
  Selection selection;
  for (const auto& layer : layers) {
    const auto scores = score_layer(*scorer_, layer, budget, context);
    selection.kept.push_back(per_head_top_k(scores, layer.num_kv_heads, length, n_kept));
  }
  return selection;
}

}  // namespace kvaudit::methods
