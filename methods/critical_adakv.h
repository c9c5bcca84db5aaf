// CriticalAdaKvMethod: CriticalKV's two stages inside AdaKV's head-adaptive layer budget (Feng et
// al. 2025, "Identify Critical KV Cache in LLM Inference from an Output Perturbation
// Perspective", arXiv 2502.03805; kvpress 0.5.5 kvpress/presses/criticalkv_press.py
// CriticalAdaKVPress). Per layer, s [Hkv, L] = the wrapped scorer's scores, α = alpha,
// ε = epsilon, r = first_stage_ratio, F = the f32 maximum:
//   n_kept = max(1, floor(L(1−cr))); n_safe = floor(n_kept·α), at least 1 when α > 0;
//   safeguard: each head's n_safe best entries of s become F;
//   head budgets: B_h = how many of the Hkv·n_kept best entries of the flattened layer [Hkv·L]
//          lie in head h (torch.topk over the flattened scores);
//   stage 1: each head's first floor(B_h·r) entries of topk(s_h, max_h floor(B_h·r)) become F;
//   stage 2: s ← (s + ε)·n(j), n(j) = the group mean of ‖v_j W_o^{(h)}‖₁ (criticalkv.h), in f32
//          (F·n overflows to +inf for n > 1, as in torch);
//   head h keeps the first B_h entries of topk(s_h, max_h B_h) (kvpress then sets them to F and
//          masks the Hkv·(L−n_kept) lowest entries of the layer: exactly the other ones).
// Real eviction: head h keeps B_h positions (Σ_h B_h = Hkv·n_kept); kvpress keeps the cache and
// masks the rest (docs/design/kvpress.md §Head-wise masking).
#pragma once

#include <memory>

#include "methods/method.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

// Per-head kept positions (ascending) of one layer from its scores [Hkv, L] and the norms n [Hkv,
// L].
std::vector<std::vector<std::int32_t>> critical_adakv_allocate(
    std::span<const float> scores, std::span<const float> norms, int num_kv_heads, int length,
    std::int64_t n_kept, double alpha, double epsilon, double first_stage_ratio);

class CriticalAdaKvMethod : public ScorerWrapperMethod {
 public:
  CriticalAdaKvMethod(std::shared_ptr<const Scorer> scorer, double alpha, double epsilon,
                      double first_stage_ratio);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;

 private:
  double alpha_;
  double epsilon_;
  double first_stage_ratio_;
};

}  // namespace kvaudit::methods
