// ScorerMethod: kvpress's ScorerPress selection. Each layer is scored by a Scorer (budget-aware
// scores, Scorer::score_for_budget) and each KV head keeps its n_kept = kept_count(L, cr) highest
// scores (ties as torch.topk on the CPU, top_k.h), returned in ascending position order.
// Source: kvpress scorer_press.py `compress` (docs/design/kvpress.md §Selection, §Budget).
#pragma once

#include <memory>

#include "methods/method.h"

namespace kvaudit::methods {

// scores[kv_head * L + j] for one layer, as a Scorer computes them for `budget`.
std::vector<float> score_layer(const Scorer& scorer, const LayerCapture& layer,
                               const Budget& budget, const SelectionContext& context);

// Per-head top-k of a layer's scores with `n_kept` per head.
std::vector<std::vector<std::int32_t>> per_head_top_k(std::span<const float> scores,
                                                      int num_kv_heads, int length,
                                                      std::int64_t n_kept);

class ScorerMethod : public Method {
 public:
  explicit ScorerMethod(std::shared_ptr<const Scorer> scorer);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  int window_needed() const override { return scorer_->window_needed(); }
  bool needs_column_sums() const override { return scorer_->needs_column_sums(); }
  bool needs_query_moments() const override { return scorer_->needs_query_moments(); }
  std::string name() const override { return scorer_->name(); }
  const Scorer& scorer() const { return *scorer_; }

 private:
  std::shared_ptr<const Scorer> scorer_;
};

}  // namespace kvaudit::methods
