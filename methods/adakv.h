// AdaKvMethod: head-adaptive budgets over any scorer within one layer (Feng et al. 2024, "Ada-KV:
// Optimizing KV Cache Eviction by Adaptive Budget Allocation", arXiv 2407.11550). Scores are the
// wrapped scorer's [Hkv, L]; n_kept = kept_count(L, cr); the layer keeps Hkv·n_kept entries in all
// (approximately, for "original"), each head its own positions (real eviction; kvpress masks).
//   variant "kvpress" (kvpress 0.5.5 AdaKVPress, docs/design/kvpress.md §AdaKVPress):
//     n_safe = floor(n_kept·α), at least 1 when α > 0 (PR #264); each head's n_safe best scores
//     are reserved (float max); then the Hkv·(L−n_kept) lowest entries of the whole layer are
//     evicted (kvpress masks them), ties broken as torch's CPU topk (top_k.h).
//   variant "original" (FFY0/AdaKV AdaptiveSnapKVCluster, normalize off;
//   docs/design/original-methods.md §AdaKV):
//     B = n_kept; c_h = how many of the top Hkv·B entries of the layer head h holds;
//     B_h = round(c_h·(1−α) + floor(α·B)) (half to even), clamped to [1, L]; head h keeps its
//     B_h best. The original budgets exclude its window (appended separately); here protected
//     positions (scored max+1 by the scorer) count inside B, as in kvpress.
#pragma once

#include <memory>

#include "methods/method.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

// Per-head kept positions (ascending) of one layer under the allocation above.
std::vector<std::vector<std::int32_t>> adakv_allocate(std::span<const float> scores,
                                                      int num_kv_heads, int length,
                                                      std::int64_t n_kept, double alpha,
                                                      AdaKvVariant variant);

class AdaKvMethod : public ScorerWrapperMethod {
 public:
  AdaKvMethod(std::shared_ptr<const Scorer> scorer, double alpha, AdaKvVariant variant);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;

 private:
  double alpha_;
  AdaKvVariant variant_;
};

}  // namespace kvaudit::methods
