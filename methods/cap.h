// CapScorer: capacity-weighted leverage of the values under query-aligned weights (CAPKV, arXiv
// 2604.25975; kvpress 0.5.5 kvpress/presses/cap_press.py CapPress). Per layer and query head h,
// over the non-sink positions j ≥ n_sink (n_sink < L required):
//   R̄     = mean over p = L..L+n_future−1 of the RoPE rotation R_p (methods/expected_attention.h)
//   μ_h    = mean over rows i ≥ n_sink of R̄ q_i   (q_i the pre-RoPE queries, queries_prerope)
//   c_j    = clamp(⟨μ_h/‖μ_h‖, k_j/‖k_j‖⟩, −1, 1)            k_j the cached (post-RoPE) keys
//   w_j    = exp(τ c_j − max_j' τ c_j')                        the query-relevance weights
//   A_h    = I + Σ_j (w_j + ε) v_j v_jᵀ                        [d, d], v_j the values
//   s_h(j) = w_j · v_jᵀ A_h⁻¹ v_j
//   s(j)   = mean over the GQA group of s_h(j); the n_sink first positions get max_layer s + 1.
// kvpress's notes on the paper, followed here: keys and anchor are L2-normalised, the max shift
// before exp, the averaged future rotation of the anchor, u_j = v_j.
// Precision: bf16 models follow kvpress's rounding points in the model dtype — cos/sin and R̄,
// R̄q, μ, the norms and normalised vectors, c, τc, the shift, w, √(w+ε), the scaled values and
// I + Σ uuᵀ are rounded to bf16; the solve and the leverage run in fp32 in kvpress and in double
// here. f32 models: the same points in f32.
#pragma once

#include <string>

#include "methods/method.h"

namespace kvaudit::methods {

class CapScorer : public Scorer {
 public:
  explicit CapScorer(CapParams params);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  bool needs_all_queries() const override { return true; }
  std::string name() const override { return "cap"; }

 private:
  CapParams params_;
};

}  // namespace kvaudit::methods
