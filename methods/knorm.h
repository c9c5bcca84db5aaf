// KnormScorer: s(j) = −‖K_j‖₂ per KV head (post-RoPE keys; RoPE preserves the norm), computed in
// fp32 as kvpress 0.5.5 does after PR #280 (`torch.linalg.vector_norm(keys, dtype=float32)`);
// we accumulate in double and round once. Devoto et al. 2024, "A Simple and Effective L2
// Norm-Based Strategy for KV Cache Compression", arXiv 2406.11430; kvpress KnormPress
// (docs/design/kvpress.md §KnormPress).
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

class KnormScorer : public Scorer {
 public:
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  bool per_entry() const override { return true; }
  std::string name() const override { return "knorm"; }
};

}  // namespace kvaudit::methods
