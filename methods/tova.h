// TovaScorer: attention of the last query before the boundary, averaged over ALL H query heads and
// shared by every KV head of the layer (Oren et al. 2024, "Transformers are Multi-State RNNs").
//   variant "kvpress" (kvpress TOVAPress, docs/design/kvpress.md §TOVAPress): a(j) =
//     mean_h A_h(L−1, j) for j < L−1 (window_attention with w = 1); the last token gets the layer
//     max + 1.
//   variant "original" (schwartz-lab-NLP/TOVA TOVACache.reduce, docs/design/original-methods.md
//     §TOVA): a(j) over all L positions, the last token included and NOT protected; applied once
//     at the boundary (the original re-applies it at every decoding step with a fixed
//     cache_size; we evaluate prefill eviction only).
// bf16 mode rounds the head mean to bf16 as torch's mean over a bf16 tensor does.
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

class TovaScorer : public Scorer {
 public:
  explicit TovaScorer(TovaVariant variant) : variant_(variant) {}
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  int window_needed() const override { return 1; }
  std::string name() const override { return "tova"; }

 private:
  TovaVariant variant_;
};

}  // namespace kvaudit::methods
