// ObservedAttentionScorer (H2O-like, kvpress ObservedAttentionPress, docs/design/kvpress.md
// §ObservedAttentionPress):
//   s_h(j) = Σ_{i<L} A_h(i, j) / (L − j)   (the column sum over the L − j queries that see j),
//   s(j)   = mean over the GQA group.
// A is eager attention (LayerCapture::column_sums, summed in fp64); kvpress requires
// attn_implementation="eager". The division and group mean run in double, rounded once to f32
// (kvpress sums the model-dtype attention; in bf16 mode its sums are coarser than ours).
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

class ObservedAttentionScorer : public Scorer {
 public:
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  bool needs_column_sums() const override { return true; }
  std::string name() const override { return "observed_attention"; }
};

}  // namespace kvaudit::methods
