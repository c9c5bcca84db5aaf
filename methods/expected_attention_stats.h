// ExpectedAttentionStatsScorer: Expected Attention with the query statistics taken from a file
// (precomputed on a calibration corpus) instead of the prompt's own queries. Per layer ℓ:
//   1. μ_h, Σ_h: the file's pre-RoPE query mean and covariance of query head h in layer ℓ (cast to
//      the model dtype first, as kvpress does).
//   2. R̄ = mean over p = L..L+n_future−1 of the RoPE rotation R_p (averaged_rope_rotation,
//      expected_attention.h); μ' = R̄ μ, Σ' = R̄ Σ R̄ᵀ.
//   3. z_h(j) = μ'_h·k_j/√d + k_jᵀ Σ'_h k_j/(2d) for j ≥ n_sink (quadratic term only with
//      use_covariance); a_h = softmax_j z_h; s(j) = mean over the GQA group.
//   4. use_vnorm: s(j) ← (s(j) + ε)·‖v_j‖₂.   5. the n_sink first positions get the layer max + 1.
// Steps 3–5 are ExpectedAttentionScorer's (expected_attention_scores). Devoto et al. 2025,
// "Expected Attention: KV Cache Compression by Estimating Attention from Future Queries
// Distribution", arXiv 2510.00636; kvpress 0.5.5 kvpress/presses/expected_attention_with_stats.py
// ExpectedAttentionStatsPress (defaults n_future_positions 512, n_sink 4, use_covariance,
// use_vnorm, epsilon 0).
//
// Artefact (the `statistics` path parameter): a safetensors file holding
//   query_mean  [num_layers, num_heads, head_dim]            pre-RoPE query means
//   query_cov   [num_layers, num_heads, head_dim, head_dim]  their covariances
// (F32, F16 or BF16, finite) — the model.safetensors of kvpress's ExpectedAttentionStats
// (huggingface_hub PyTorchModelHubMixin: the hub repositories alessiodevoto/exp_att_stats_*, or
// what `python -m kvpress.presses.expected_attention_with_stats --model_name M --output_path DIR`
// writes; kvpress computes μ and the unbiased covariance, ÷(N−1), of the pre-RoPE queries of its
// samples minus their first n_sink tokens). Its shape must equal the model's (checked on the first
// capture; the error names the file).
// Deviations: kvaudit cannot reach the hub or a dataset; the user brings the file. Numerics as
// ExpectedAttentionScorer: computed in double and rounded once to f32 (kvpress rotates and scores
// in the model dtype); in bf16 mode only the statistics are rounded to bf16 first.
// Query visibility: none — the scores read the keys and values of the prompt, never its queries.
#pragma once

#include <string>

#include "methods/artefact_files.h"
#include "methods/method.h"

namespace kvaudit::methods {

class ExpectedAttentionStatsScorer : public Scorer {
 public:
  // Reads and checks the file now (std::invalid_argument naming it on failure).
  explicit ExpectedAttentionStatsScorer(ExpectedAttentionStatsParams params);
  // From statistics already in memory (tests): query_mean [layers, H, d], query_cov
  // [layers, H, d, d]; `source` names them in errors. params.statistics is not read.
  ExpectedAttentionStatsScorer(ExpectedAttentionStatsParams params, ArtefactTensor query_mean,
                               ArtefactTensor query_cov, std::string source);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  std::string name() const override { return "expected_attention_stats"; }

 private:
  void check_inputs() const;  // parameters and tensor shapes (the model is checked in score)

  ExpectedAttentionStatsParams params_;
  std::string source_;
  ArtefactTensor query_mean_;
  ArtefactTensor query_cov_;
};

}  // namespace kvaudit::methods
