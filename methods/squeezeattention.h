// SqueezeAttentionMethod: layer-wise budgets from the self-attention block's effect on the residual
// stream, with any sequence-wise scorer inside each layer (Wang et al., ICLR 2025,
// "SqueezeAttention: 2D Management of KV-Cache in LLM Inference via Layer-wise Optimal Budget";
// official code hetailang/SqueezeAttention @a1933d1, utils_hh/modify_llama_drop.py
// `LlamaDecoderLayer_squeeze.forward` (the cosine) and `LlamaModel_squeeze.forward` (clustering
// and budgets)). Not in kvpress 0.5.5.
//
//   importance  c_ℓ = mean_{i<L} cos(x_i, x_i + attn_i)  (LayerCapture::attention_cosine; x the
//               residual stream entering layer ℓ, attn its self-attention block's output)
//   groups      1-D k-means with k = 3 of {c_ℓ}: G1 (lowest centre) … G3 (highest centre: the
//               layers whose attention changes the stream least)
//   budgets     n_kept = kept_count(L, cr), the cell's per-layer budget. G3 layers keep
//               n₃ = max(1, ⌊s·n_kept⌋) (s = class3_share); the others share the rest
//               R = N·n_kept − |G3|·n₃: ⌊R/m⌋ each (m = N − |G3|), the first R mod m of them in
//               layer order one more; then fit_layer_budgets(·, N·n_kept, 1, L) (layer_budgets.h)
//               moves anything above L to the layers below it. Σ_ℓ n_ℓ = N·n_kept exactly.
//   inside      layer ℓ keeps, per KV head, the n_ℓ highest scores of the wrapped scorer, scored
//               for a budget whose kept_count is n_ℓ (budget_for_kept), ties as torch's CPU topk.
// Deviations from the official code, and why:
//  (1) k-means: the official sklearn KMeans(n_clusters=3) (k-means++ seeding, Lloyd) can stop in a
//      local optimum and depends on its seed; we take the exact optimum of the same objective,
//      which in 1-D is a split of the sorted values into three contiguous runs (values sorted by
//      (c, layer); ties: the first minimal split (i, j) in lexicographic order). Fewer than 3
//      layers (or all in G3): no reallocation, every layer keeps n_kept.
//  (2) The official G3 budget is an absolute share of the prompt (KV_class3) beside the initial
//      share (ini_size); ours is a share of the cell's budget, s = KV_class3 / ini_size (its
//      README's examples: 0.08/0.21 ≈ 0.38 and 0.25/0.4 = 0.625; our default 0.5).
//  (3) The official budgets are int(a·L) (a the non-G3 share), which drops the fractional tokens;
//      we hand them out so that the total is the cell's.
//  (4) The official cosine is computed in the model dtype; ours in fp64 over the model's values.
//  (5) The official code wraps StreamingLLM / sliding window / H2O as decoding-time eviction; here
//      the wrapped scorer selects once after prefill, as every method of this suite does.
// Agreement with the official clustering, budget and StreamingLLM code (restated from
// modify_llama_drop.py, which needs transformers 4.3x and flash-attn) on two random cases of 8 and
// 10 layers (tests/golden/layer_budgets/official.json): identical groups, budgets and kept sets.
// The capture's cosines agree with transformers on the tiny models to 2e-7
// (tests/golden/layer_budgets/hf_attention_cosine.json). The CUDA capture does not record the
// cosines yet: a SqueezeAttention cell on the CUDA engine fails, naming the missing field.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "methods/method.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

// Parameters: SqueezeAttentionParams (method_params.h).

// c_ℓ: the mean of layer.attention_cosine (throws if it was not captured).
double squeeze_layer_importance(const LayerCapture& layer);

// The group (0, 1, 2 = G1, G2, G3) of each layer for importances c (exact 1-D 3-means; all 0 when
// there are fewer than 3 layers).
std::vector<int> squeeze_groups(std::span<const double> importance);

// n_ℓ for the groups, the cell's n_kept, s = class3_share and L.
std::vector<std::int64_t> squeeze_layer_budgets(std::span<const int> groups, std::int64_t n_kept,
                                                double class3_share, std::int64_t length);

class SqueezeAttentionMethod : public ScorerWrapperMethod {
 public:
  SqueezeAttentionMethod(std::shared_ptr<const Scorer> scorer, double class3_share);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  bool needs_attention_cosine() const override { return true; }
  std::string name() const override { return "squeezeattention"; }

 private:
  double class3_share_;
};

}  // namespace kvaudit::methods
