// ScorerMethod: kvpress's ScorerPress selection. Each layer is scored by a Scorer (budget-aware
// scores, Scorer::score_for_budget) and each KV head keeps its n_kept = kept_count(L, cr) highest
// scores (ties as torch.topk on the CPU, top_k.h), returned in ascending position order.
// Source: kvpress scorer_press.py `compress` (docs/design/kvpress.md §Selection, §Budget).
#pragma once

#include <memory>

#include "methods/method.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

// scores[kv_head * L + j] for one layer, as a Scorer computes them for `budget`.
std::vector<float> score_layer(const Scorer& scorer, const LayerCapture& layer,
                               const Budget& budget, const SelectionContext& context);

// Per-head top-k of a layer's scores with `n_kept` per head.
std::vector<std::vector<std::int32_t>> per_head_top_k(std::span<const float> scores,
                                                      int num_kv_heads, int length,
                                                      std::int64_t n_kept);

class ScorerMethod : public ScorerWrapperMethod {
 public:
  explicit ScorerMethod(std::shared_ptr<const Scorer> scorer);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
};

}  // namespace kvaudit::methods
