// ReFreeKV: request-adaptive pruning with a threshold T on the relative L2-norm loss of the last
// prompt token's attention row; the realised retention is an outcome, not a setting.
// Source: Patrick-Ni/ReFreeKV @cc68486, modified_models/evict_utils.py `H2OKVCluster.update_kv`
// (the `--method h2o --dynamic --metric last_token_attn` path of scripts/run_refreekv.sh) and
// modified_models/dynamic_metrics.py `last_token_attn`; Ni et al. 2025, "ReFreeKV: Towards
// Threshold-Free KV Cache Compression", arXiv 2502.16886; docs/design/original-methods.md
// §ReFreeKV.
// Per layer, w = window (8 in the original's main.py), P = L − w, budget 1.0 (C = L):
//   1. ranking   r_k(j) = Σ_{g ∈ group(k)} Σ_{i < w} A_g(i, j), j < P (window-causal softmax of the
//                last w queries, methods/window_attention.h); order the P prefix tokens by r_k
//                ASCENDING (least important first): topk(P) then flip.
//   2. criterion a_h(j) = A_h(w−1, j): softmax of the last prompt query over all L keys (fp32 cast
//                to the model dtype), restricted to j < P (window columns zeroed, NOT
//                renormalised). base = mean over query heads h of ‖a_h‖₂.
//   3. ρ_j = mean_h sqrt(Σ_{t ≥ j} a_h(order_{k(h)}[t])²), ratio_j = (base − ρ_j) / base, j ∈ [0,
//   P).
//   4. j* = the LARGEST j with ratio_j ≤ T (none → keep everything, as the original's −1).
//   5. every KV head keeps its P − j* best-ranked prefix tokens plus the w window tokens.
//   realised retention of a request = mean over layers of (P − j* + w) / L (`real_capacity_ratio`).
// Quirks reproduced: "largest j with ratio ≤ T" (not the first crossing); the SAME count P − j* for
// every head of a layer (different tokens); j < P so at least one prefix token survives; the
// criterion is unnormalised after the window columns are zeroed.
// GQA (deviation, stated): the original expands KV to the H query heads (KVCache-Factory's
// query_head layout) and selects per query head; our cache is per KV head, so the ranking is the
// SUM over the group (KVCache-Factory's kv_head granularity with gqa_score_agg=sum). The criterion
// keeps the per-query-head mean. With G = 1 this is the original exactly.
// Precision: A as the reference (fp32 softmax, bf16 in bf16 mode); the ranking sums, norms and
// cumulative sums in double (the original: ranking sum in the model dtype, norms in fp32). Ties in
// the ranking go to the lower position (top_k.h); torch.topk's tie order is unspecified. T < 0
// (the original's random-eviction mode) is rejected.
#pragma once

#include <cstdint>
#include <vector>

#include "methods/method.h"

namespace kvaudit::methods {

// One layer's cut.
struct ReFreeKvLayerCut {
  std::int64_t cut = 0;                         // j*: prefix tokens evicted from every KV head
  std::int64_t kept_per_head = 0;               // P − j* + w
  std::vector<double> loss_ratio;               // ratio_j for j = 0..P−1
  std::vector<std::vector<std::int32_t>> kept;  // [kv_head] ascending positions
};

// Steps 1–5 for one layer; validates the capture and T (std::invalid_argument naming refreekv).
ReFreeKvLayerCut refreekv_layer_cut(const LayerCapture& layer, int window, double threshold);

// A request's selection with its realised retention.
struct ReFreeKvOutcome {
  Selection selection;
  std::vector<std::int64_t> cut_per_layer;  // j* per layer
  double realised_retention = 0.0;          // mean over layers of (P − j*_ℓ + w) / L
};

class ReFreeKvMethod : public Method {
 public:
  explicit ReFreeKvMethod(int window);
  // Uses budget.threshold (T); budget.compression is ignored (the method has no ratio).
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  ReFreeKvOutcome select_with_retention(std::span<const LayerCapture> layers,
                                        double threshold) const;
  int window_needed() const override { return window_; }
  std::string name() const override { return "refreekv"; }

 private:
  int window_;
};

}  // namespace kvaudit::methods
