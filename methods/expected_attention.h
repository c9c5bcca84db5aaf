// ExpectedAttentionScorer: the attention future queries are expected to pay (Devoto et al. 2025,
// "Expected Attention", arXiv 2510.00636; kvpress ExpectedAttentionPress, docs/design/kvpress.md
// §ExpectedAttentionPress), per layer:
//   1. μ_h, Σ_h: mean and BIASED covariance of the pre-RoPE queries of rows n_sink..L−1
//      (LayerCapture query_sum / query_outer / query_count): Σ = Σ q qᵀ / n − μ μᵀ.
//   2. R̄ = mean over p = L..L+n_future−1 of R_p = diag(cos_p) + P·diag(sin_p), cos_p/sin_p from
//      the model's rope_inv_freq as HF computes them (θ = f32(p)·inv_freq in f32, cat(θ, θ)), P the
//      rotate_half matrix (P[d/2+i, i] = 1, P[i, d/2+i] = −1). μ' = R̄ μ, Σ' = R̄ Σ R̄ᵀ (the averaged
//      rotation applied once, as kvpress does).
//   3. z_h(j) = μ'_h·k_j/√d + k_jᵀ Σ'_h k_j/(2d) for the non-sink keys j ≥ n_sink (quadratic term
//      only with use_covariance); a_h = softmax_j z_h; s(j) = mean over the GQA group.
//   4. use_vnorm: s(j) ← (s(j) + ε)·‖v_j‖₂.   5. the n_sink first positions get the layer max + 1.
// Everything is computed in double and rounded once to f32 (kvpress runs the moments and the
// softmax in the model dtype; in bf16 mode our scores are the exact values its bf16 ones round).
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

// Parameters: ExpectedAttentionParams (method_params.h).

// R̄ [d, d] row-major for a boundary L (step 2), exposed for tests.
std::vector<double> averaged_rope_rotation(std::span<const float> inv_freq, std::int64_t length,
                                           int n_future_positions);

// Step 3 for one query head: from Σq [d] and Σqqᵀ [d, d] over n rows, μ = Σq/n, Σ = Σqqᵀ/n − μμᵀ,
// then mean_out = R̄ μ [d] and, with covariance, covariance_out = R̄ Σ R̄ᵀ [d, d] (fp64, fixed loop
// order; the GPU scorer calls it too, so both rotate bit-identically). covariance_out is untouched
// without covariance.
void rotate_query_moments(const double* query_sum, const double* query_outer, double n,
                          std::span<const double> rotation, std::size_t head_dim,
                          bool with_covariance, double* mean_out, double* covariance_out);

// The rotation step alone, from a mean μ [d] and covariance Σ [d, d] already in hand (the prompt's
// moments above; ExpectedAttentionStatsScorer's statistics from a file): mean_out = R̄ μ and, with
// covariance, covariance_out = R̄ Σ R̄ᵀ, in the same loop order.
void rotate_query_statistics(const double* mean, const double* covariance,
                             std::span<const double> rotation, std::size_t head_dim,
                             bool with_covariance, double* mean_out, double* covariance_out);

// Steps 3–5 of one layer from the rotated moments of every query head: rotated_means [H, d] (μ'),
// rotated_covariances [H, d, d] (Σ', read only with use_covariance). The scorer calls it with the
// prompt's own moments; ExpectedAttentionStatsScorer (expected_attention_stats.h) with statistics
// from a file.
void expected_attention_scores(const LayerCapture& layer, const ExpectedAttentionParams& params,
                               std::span<const double> rotated_means,
                               std::span<const double> rotated_covariances,
                               std::span<float> scores);

class ExpectedAttentionScorer : public Scorer {
 public:
  explicit ExpectedAttentionScorer(ExpectedAttentionParams params);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  bool needs_query_moments() const override { return true; }
  std::string name() const override { return "expected_attention"; }

 private:
  ExpectedAttentionParams params_;
};

}  // namespace kvaudit::methods
