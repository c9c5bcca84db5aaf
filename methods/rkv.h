// RkvScorer: R-KV, redundancy-aware KV eviction for reasoning models (Cai et al. 2025, "R-KV:
// Redundancy-aware KV Cache Compression for Reasoning Models", arXiv 2505.24133; official code
// github.com/Zefan-Cai/R-KV at d15c9767, rkv/compression/r1_kv.py R1KV.update_kv and rkv/utils.py
// compute_attention_scores / cal_similarity). Meant for decode-time compression
// (runners/unit/decoding_compression.h), where the candidates are the current cache and the window
// rows are the last α decode steps' queries; it also scores a prefill capture.
//
// For a layer with L candidates, window w = α (the last w candidates are the window's own tokens),
// KV head g with query heads G(g), window queries q_{h,r} (r = 0..w−1), keys k_j:
//   importance (official compute_attention_scores with pooling "max", then R1KV.update_kv):
//     z_g(r, j)  = max_{h ∈ G(g)} q_{h,r}·k_j / √d                       (max of the LOGITS)
//     a_g(j)     = mean_r softmax_{j' < L−w}(z_g(r, ·))_j                 (window keys excluded
//                                                                          from the softmax)
//     I_g(j)     = max_{|j'−j| ≤ ⌊kernel/2⌋, j' < L−w} a_g(j')           (max_pool1d)
//   redundancy (official cal_similarity, retain_direction "last"):
//     S_g(i, j)  = k̂_i·k̂_j over all L keys, k̂ = k / (‖k‖ + 1e-8), S_g(i, i) = 0
//     for each row i: the largest j with S_g(i, j) > threshold (j = 0 when there is none, an
//     artefact of the official torch.where/max kept here) gets S_g(i, j) = 0 — the most recent
//     near-duplicate of a token does not count against it
//     R_g(j)     = softmax_j( mean_i S_g(i, j) )  over all L columns
//   score        Z_g(j) = λ·I_g(j) − (1−λ)·R_g(j) for j < L−w; the window gets the layer max + 1
//                (the official code keeps the window unconditionally and picks budget − w others:
//                the same set whenever n_kept ≥ w).
// Paper vs code: the paper/README state Z = λ·I − (1−λ)·R with λ = 0.1 recommended and "keep at
// most β most-recent similar neighbours"; the code defaults to λ = 0.07 (R1KV, run_math.py) and
// spares exactly one neighbour per row (retain_direction "last"; retain_ratio is unused there).
// We follow the code; λ and the threshold are parameters.
// bf16 mode rounds where torch computes in the model dtype: the logits after the matmul and after
// the division, the window mean, ‖k‖, k̂, S, the column mean, the softmax output and each term of
// Z (the softmaxes themselves run in fp32, as in the official code).
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

class RkvScorer : public Scorer {
 public:
  // Throws std::invalid_argument for window < 1, an even or non-positive kernel, λ outside [0, 1].
  explicit RkvScorer(const RkvParams& params);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  int window_needed() const override { return params_.window; }
  std::string name() const override { return "rkv"; }

 private:
  RkvParams params_;
};

}  // namespace kvaudit::methods
