// SnapKvScorer: observation-window attention, pooled (Li et al. 2024, "SnapKV: LLM Knows What You
// are Looking for Before Generation"). A = window_attention(w) (window_attention.h); columns
// j < L−w are scored, the w window positions get the layer's max + 1 (kvpress PR #227).
//   variant "kvpress" (kvpress SnapKVPress, docs/design/kvpress.md §SnapKVPress; defaults w = 64,
//   k = 5, avg):
//     s_h(j) = mean_r A_h(r, j);  s_h ← pool_k(s_h) per query head;  s(j) = mean over the group.
//   variant "original" (FasterDecoding/SnapKV LongBench configs, docs/design/original-methods.md
//     §SnapKV, PyramidKV and StreamingLLM; defaults w = 32, k = 7, max): s_h(j) = Σ_r A_h(r, j)
//     (the original sums the window), reduced over the GQA group by mean BEFORE pooling (the
//     original repeats KV per query head; AdaKV's GQA support, docs/design/original-methods.md
//     §AdaKV, averages the group before pooling, which is what a per-KV-head cache needs), then
//     pool_k.
// Pooling (stride 1, padding k/2): avg counts the zero padding in the divisor (count_include_pad);
// max ignores the padding (torch max_pool1d pads with −∞). bf16 mode rounds the window mean, the
// pool and the group mean to bf16 as torch does on bf16 tensors.
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

// Parameters: SnapKvParams (method_params.h).

// pool_k over one row of n scores (zero/−∞ padding as above), in f32, optional bf16 rounding.
std::vector<float> pool_scores(std::span<const float> row, int kernel_size, Pooling pooling,
                               bool bf16);

class SnapKvScorer : public Scorer {
 public:
  explicit SnapKvScorer(SnapKvParams params);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  int window_needed() const override { return params_.window; }
  std::string name() const override { return "snapkv"; }
  const SnapKvParams& params() const { return params_; }

 private:
  SnapKvParams params_;
};

}  // namespace kvaudit::methods
