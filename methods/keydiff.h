// KeyDiff: keep the most distinctive keys (Park et al. 2025, "KeyDiff: Key Similarity-Based KV
// Cache Eviction for Long-Context LLM Inference", arXiv 2504.15364;
// docs/design/original-methods.md §KeyDiff).
//   anchor a = mean_j k_j / max(‖k_j‖, 1e-12)   (F.normalize), per KV head, post-RoPE keys
//   s(j)     = −cos(k_j, a) = −k_j·a / max(‖k_j‖·‖a‖, 1e-8)   (F.cosine_similarity)
// Computed in double, rounded once to f32.
//   variant "oneshot" (kvpress KeyDiffPress, registry `keydiff`): KeyDiffScorer, one anchor over
//   all L. variant "block" (kvpress `block_keydiff` = BlockPress(KeyDiffPress(), block_size=128),
//   the
//     paper's block-iterative eviction simulated after a full prefill): BlockKeyDiffMethod. Per KV
//     head: kept = [0, n_kept); for each block [i, min(i+B, L)), i = n_kept, n_kept+B, ...:
//     candidates = kept ∪ block, re-anchor and score over the candidates, keep the top n_kept.
//     B = block_size if block_size < L else L. Candidates are ordered as kvpress orders them
//     ([survivors in topk order, block]) so ties resolve as torch's CPU topk does (top_k.h).
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

// −cos(k_j, anchor over `positions`) for each j in `positions` (keys [L, d] of one KV head).
std::vector<float> keydiff_scores(std::span<const float> keys, int head_dim,
                                  std::span<const std::int32_t> positions);

class KeyDiffScorer : public Scorer {
 public:
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  std::string name() const override { return "keydiff"; }
};

class BlockKeyDiffMethod : public Method {
 public:
  explicit BlockKeyDiffMethod(int block_size);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  std::string name() const override { return "keydiff(block)"; }

 private:
  int block_size_;
};

}  // namespace kvaudit::methods
