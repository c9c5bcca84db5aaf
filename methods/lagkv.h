// LagKvScorer: lag-relative scores. The prefix after the n_sink sinks is cut into partitions of
// lag_size tokens; each partition is scored against the NEXT one (its "lag" reference), which a
// token of the scored partition cannot see in a causal model but the compressor can.
//   Per KV head, for X ∈ {K, V} and a token t of partition p with reference partition p+1:
//     lo_c = min_{u ∈ p+1} X_u[c],  hi_c = max_{u ∈ p+1} X_u[c]   (per channel c < d)
//     z_t[c] = (X_t[c] − lo_c) / (hi_c − lo_c)
//     σ_X(t) = std_c z_t[c]   (unbiased: divided by d − 1)
//     π_X(t) = softmax over the lag_size tokens t of partition p of σ_X(t)
//     s(t) = (π_K(t) + π_V(t)) / 2
//   cross_scoring = false (default): s(t) ← rank of s(t) within its partition / lag_size (0 for
//   the smallest), so every scored partition contributes its best tokens equally; true: the raw
//   s(t) are compared across partitions.
//   With P = floor((L − n_sink) / lag_size) whole partitions, partitions 0..P−2 are scored; the
//   sinks, the last whole partition and the remainder (lag_size + (L − n_sink) mod lag_size
//   tokens) score 1 and so are kept first.
//   Short prompts, L < n_sink + 2·lag_size (no partition has a reference): the sinks score 1 and
//   token n_sink + i scores i / (L − n_sink), so top-k keeps the sinks and the most recent tokens
//   (StreamingLLM).
// Citation: Liang et al. 2025, "LagKV: Lag-Relative Information of the KV Cache Tells Which Tokens
// Are Important", arXiv 2504.04704; kvpress 0.5.5 kvpress/presses/lagkv_press.py LagKVPress.
// Precision: in bf16 mode the intermediate tensors kvpress computes in the model dtype are
// rounded to bf16 where torch rounds them (the differences, the quotients, the std, the softmax,
// the mean of the two, the rank / lag_size and the short-prompt ramp); reductions accumulate in
// double (torch: fp32). Ranks of tied scores (frequent in bf16) follow torch's CPU argsort, which
// is not stable beyond 16 elements: ATen sorts (value, index) pairs with std::sort and "NaN last";
// we run the same std::sort (matched torch 2.15's argsort on tie-heavy f32/bf16 rows of 8..128
// elements). A zero range hi_c = lo_c gives ±inf/NaN as in kvpress (NaN ranks above every number
// in the top-k, as torch's topk).
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

class LagKvScorer : public Scorer {
 public:
  explicit LagKvScorer(const LagKvParams& params);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  std::string name() const override { return "lagkv"; }

 private:
  LagKvParams params_;
};

}  // namespace kvaudit::methods
