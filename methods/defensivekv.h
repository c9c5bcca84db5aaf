// DefensiveKV: defensive-aggregation scores (defensive_scoring.h) with AdaKV-style selection
// across the KV heads of each layer. Source: FFY0/DefensiveKV @9251b95,
// kvpress/presses/efficient_ada_scorer_press.py `compress` (l.46), registry name
// `efficient_defensivekv`; Feng et al. 2025, arXiv 2510.13334; docs/design/original-methods.md
// §DefensiveKV selection.
//
//   n_kept = int(L·(1 − cr)·Hkv)   per layer, over the flattened Hkv·L scores (Python float
//                                  product, truncated; no max(1, ·) clamp in the original)
//   kept   = the n_kept highest flattened scores; a head's budget is its count (adaptive).
// cr = 0 keeps everything (the original returns the cache unchanged). Ties (e.g. at the
// protection value M) go to the lower flat index (top_k.h); torch.topk's tie order is unspecified.
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

class DefensiveKvMethod : public Method {
 public:
  // `window` = w, the observation window (32 in the paper and the catalogue).
  explicit DefensiveKvMethod(int window);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  int window_needed() const override { return window_; }
  std::string name() const override { return "defensivekv"; }

 private:
  int window_;
};

}  // namespace kvaudit::methods
