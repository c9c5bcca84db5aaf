// MergingMethod: a scorer's ScorerPress selection that folds every evicted value into its most
// key-similar kept entry instead of dropping it (kvpress 0.5.5 kvpress/presses/merging_press.py
// MergingPress; inspired by Token Merging, Bolya et al., ICLR 2023, arXiv 2210.09461, and D2O,
// Wan et al., 2024, "D2O: Dynamic Discriminative Operations for Efficient Long-Context Inference
// of Large Language Models", arXiv 2406.13035).
//
// Per layer and KV head, with L candidates, n = max(1, floor(L(1−cr))) kept:
//   kept K = the wrapped scorer's top-n (torch.topk order r_0, r_1, … best first), evicted
//   E = the other L − n positions, ascending. Nothing happens when E or K is empty.
//   Key cosine similarity (all f32, keys as the cache holds them, post-RoPE):
//     k̂_j = k_j / max(‖k_j‖, 1e−6);  s(e, t) = k̂_e · k̂_t;
//     t(e) = argmax_{t∈K} s(e, t) (the first in topk order on an exact tie), σ_e = s(e, t(e)).
//   Threshold gate: ok_e = σ_e ≥ τ (similarity_threshold).
//   Fraction gate (merge_fraction f < 1 and some ok_e): θ = torch.quantile over e of
//     (σ_e if ok_e else −∞) at q = 1 − f (linear interpolation, q and its rank q·(|E|−1) in f32);
//     ok_e ← ok_e ∧ σ_e ≥ θ. kvpress quirk kept: when the rank falls among the −∞ entries θ is NaN
//     (−∞ + 0·∞) or −∞, so then no token / every ok token merges.
//   Weights: w_e = max(σ_e, 0)·[ok_e] · ‖v_e‖ / (‖v_e‖ + ‖v_t(e)‖ + 1e−6).
//   Merge: for each kept t with W_t = Σ_{e: t(e)=t} w_e > 0 (sums in f32, e ascending),
//     v'_t = (v_t + Σ_{e: t(e)=t} w_e·v_e) / (1 + W_t), rounded to the model dtype (bf16 models:
//     kvpress's `.to(values.dtype)`); every other kept value and every key is unchanged.
// Runtime: select() returns the kept sets and Selection::value_replacements (the v'_t); the unit
// runner writes them into the cache after retain() (unit_runner.cpp evict_cell →
// SequenceCache::replace_values; only the CPU cache implements it, so a CUDA rank fails the cell).
// Deviations: none in the formula. Norms and dot products are accumulated in double and rounded
// to f32 (torch accumulates in f32 in its own order): a few f32 ulps, which can only matter at an
// exact argmax or gate tie. kvpress computes the quantile's lerp with torch's kernel (possibly a
// fused multiply-add); we use a + w·(b − a) for w < 1/2, b − (b − a)(1 − w) otherwise.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "methods/method.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

struct MergeRule {
  double similarity_threshold = 0.0;  // τ in [0, 1]
  double merge_fraction = 1.0;        // f in (0, 1]
};

// The merged values of one KV head: keys and values [length, head_dim] row-major (pre-eviction),
// kept_in_rank_order = the kept positions in torch.topk order (best first). Returns one
// ValueReplacement (layer and kv_head left 0) per kept position that received a merge, in
// ascending position order.
std::vector<ValueReplacement> merge_evicted_values(std::span<const float> keys,
                                                   std::span<const float> values, int length,
                                                   int head_dim,
                                                   std::span<const std::int64_t> kept_in_rank_order,
                                                   const MergeRule& rule, bool model_is_bf16);

// torch.quantile(x, q) (linear interpolation) of one row as torch computes it in f32, −∞ entries
// included (exposed for the tests of the fraction gate's −∞ quirk).
float torch_quantile_f32(std::vector<float> x, double q);

class MergingMethod : public ScorerWrapperMethod {
 public:
  MergingMethod(std::shared_ptr<const Scorer> scorer, MergeRule rule);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;

 private:
  MergeRule rule_;
};

}  // namespace kvaudit::methods
