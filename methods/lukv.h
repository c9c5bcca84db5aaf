// LukvMethod: LU-KV's head-wise budgets from a precomputed budget curve around a scorer.
//
// Citation: "Predicting Future Utility: Global Combinatorial Optimization for Task-Agnostic KV
// Cache Eviction" (arXiv 2602.08585; official code github.com/baidu-baige/LU-KV);
// kvpress 0.5.5 kvpress/presses/lukv_press.py LUKVPress.
//
// Formula, per layer ℓ with L candidates and Hkv KV heads, for the cell's compression cr > 0
// (cr = 0 keeps everything):
//   s[h, j]      = the wrapped scorer's scores of the layer;
//   protected    = max over the whole layer of s, plus 1 (in f64, stored back in f32; rounded to
//                  bf16 for a bf16 model), written over positions j < min(sink, L) and
//                  j ≥ max(0, L − window) of every head;
//   t            = clamp(round_half_even(100·cr) − 1, 0, 98)       (the curve's target index)
//   r[h]         = curve[t, ℓ, h]                                   (the head's prune ratio, f32)
//   ideal[h]     = clamp(1 − r[h], 0, 1) · L                        (f32)
//   total        = clamp(round_half_even(Σ_h ideal[h]), Hkv, Hkv·L) (f32 sum in torch's
//                  CPU order, torch_cpu_sum)
//   base[h]      = floor(ideal[h]);  remainder = total − Σ base
//   if remainder > 0: the min(remainder, Hkv) heads with the largest fractional parts
//                  ideal[h] − base[h] get one more (ties as torch.topk on the CPU, top_k.h)
//   keep[h]      = clamp(base[h], 1, L)
//   kept[ℓ][h]   = the first keep[h] positions of a STABLE descending sort of the protected
//                  scores of head h (equal scores: the lower position first; NaN ranks first).
// The cell's compression only picks the curve's row: the realised retention is the curve's, not
// 1 − cr. The curve is a float .npy of shape [99, layers, KV heads] (npy_file.h
// read_lukv_curve) named by the `curve` path parameter; its layer and KV-head counts must be the
// model's (checked at plan time and on every capture).
//
// Deviations from kvpress: none in the arithmetic. kvpress looks the curve up by (model name,
// scorer class) in a table of download URLs (only Llama-3.1-8B with ExpectedAttention ε = 0.02,
// sink 4, window 1 today); here the manifest names the file, so the user must bring a curve made
// for the model and for the wrapped scorer (the official repository's generate_curve.sh). kvpress
// masks the evicted entries (masked_key_indices); here they are evicted.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "methods/method.h"
#include "methods/npy_file.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

// The curve row of compression cr: clamp(round_half_even(100·cr) − 1, 0, 98).
int lukv_target_index(double compression);

// Σ x in the order torch's CPU sum adds a contiguous f32 vector (ATen SumKernel.cpp cascade_sum;
// torch 2.15, checked against torch for 1..200 elements): fewer than 8 elements: four partial sums
// p[k] = Σ_i x[4i + k], the leftovers added to p[0], then p[0] + p[1] + p[2] + p[3]; otherwise
// the same over 8-lane vectors (p[k] = Σ_i v[4i + k], leftover vectors into p[0], combined in
// order), then 0 + the scalar tail in order + the 8 lanes of p[0] in order. (torch adds cascade
// levels from 512 elements on; KV-head counts stay far below, and the rule is used only there.)
// A sequential sum differs from torch's from 5 heads on, and with L·Hkv large enough for f32 steps
// of 0.25 that changes round(Σ ideal) in a few percent of layers.
float torch_cpu_sum(std::span<const float> x);

// keep[h] of one layer (see the header comment) from its prune ratios r[h] and L.
std::vector<std::int64_t> lukv_keep_counts(std::span<const float> prune_ratios,
                                           std::int64_t length);

// The positions of the `keep` best scores of one head under a stable descending sort (ties: the
// lower position first; NaN first), ascending.
std::vector<std::int32_t> stable_top_positions(std::span<const float> scores, std::int64_t keep);

class LukvMethod : public ScorerWrapperMethod {
 public:
  // `curve`: as read_lukv_curve returns it ([99, layers, KV heads]); `curve_source` names it in
  // messages (the file's path).
  LukvMethod(std::shared_ptr<const Scorer> scorer, NpyArray curve, std::string curve_source,
             int sink, int window);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;

 private:
  NpyArray curve_;
  std::string curve_source_;
  int sink_;
  int window_;
};

}  // namespace kvaudit::methods
