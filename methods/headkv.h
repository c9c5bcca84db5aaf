// HeadKvMethod: head-level budgets from head-importance scores, SnapKV selection within each head
// (Fu et al., ICLR 2025, "Not All Heads Matter: A Head-Level KV Cache Compression Method with
// Integrated Retrieval and Reasoning"; official code github.com/FYYFU/HeadKV at 0862a09,
// headkv/snapkv_utils.py ReasonSnapKVCluster, the method the paper calls HeadKV-R2). Not in kvpress
// 0.5.5.
//
// Inputs: the cell's n = kept_count(L, cr) (the per-head average budget, the official
// base_capacity, window included), the observation window w, and the per-(layer, query head)
// importance s from the `head_scores` file (methods/head_scores_file.h; the official
// retrieval-reasoning scores, one file per model, brought by the user).
//   b     = n − w                                   (budget beyond the window)
//   p     = (s / Σ s)^T, then p ← p / Σ p          (over all layers × heads; T = temperature)
//   f     = b // β  (Python floor division, β ≥ 1); min = b − f; pool = f · layers · heads
//   cap_h = round(p_h · pool + min)                 (round half to even, like torch.round)
// Head h keeps the window (the last w positions) and its cap_h highest SnapKV scores among the
// positions j < L − w (all of them when cap_h ≥ L − w): s_h(j) = pool_k(mean_r A_h(r, j)) over
// the w window queries (window_attention.h; max or avg pooling, stride 1, padding k/2), the
// official calcul_attn_sore. Ties: torch's CPU order of torch.sort(descending=True), which the
// official code uses (std::sort over (score, position) pairs, reproduced; not "lower position
// first"). Σ_h cap_h + w differs from n per head only by the rounding of cap_h (realised retention
// is recorded). At cr = 0 (n = L) the budget is still redistributed: low-importance heads drop
// positions, as in the official code (which compresses whenever b ≤ L − w).
//
// Deviations (docs/METHODS.md):
//  * GQA: the official code repeats KV per query head and keeps a set per query head; kvaudit keeps
//    one set per KV head, so a KV head's importance is the sum of its group's p (equivalently its
//    budget is the mean of its query heads' budgets, before rounding) and its score the group mean
//    of the pooled per-query-head scores (SnapKvScorer, kvpress variant). Identical for MHA.
//  * n ≤ w (b ≤ 0, where the official arithmetic is meaningless): every head keeps its last n
//    positions.
//  * The official code reshapes the file's values in key order; here keys are parsed ("l-h").
#pragma once

#include <cstdint>
#include <vector>

#include "methods/head_scores_file.h"
#include "methods/method.h"
#include "methods/snapkv.h"

namespace kvaudit::methods {

// Parameters: HeadKvParams (method_params.h).

// Python's float floor division a // b (CPython float_floor_div: fmod-based, not floor(a / b)).
double python_floor_div(double a, double b);

// cap[layer · num_kv_heads + kv_head]: the budget beyond the window of every KV head, from the
// file's per-query-head scores (scores.heads query heads, grouped by scores.heads / num_kv_heads)
// and b = n − w > 0, as in the formula above.
std::vector<std::int64_t> headkv_capacities(const HeadScores& scores, int num_kv_heads,
                                            std::int64_t beyond_window, double beta,
                                            double temperature);

class HeadKvMethod : public Method {
 public:
  // Reads params.head_scores (an absolute path, or relative to the working directory);
  // std::invalid_argument naming the file when it is not a valid head-score file.
  explicit HeadKvMethod(HeadKvParams params);
  // Built from scores already read (tests).
  HeadKvMethod(HeadKvParams params, HeadScores scores);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  int window_needed() const override { return params_.window; }
  std::string name() const override { return "headkv"; }

 private:
  HeadKvParams params_;
  HeadScores scores_;
  SnapKvScorer scorer_;
};

}  // namespace kvaudit::methods
