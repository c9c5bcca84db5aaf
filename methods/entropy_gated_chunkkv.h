// EntropyGatedChunkKvMethod: ChunkKV whose chunks are gated by the entropy of their token scores
// (kvpress 0.5.5 kvpress/presses/entropy_gated_chunkkv_press.py EntropyGatedChunkKVPress; after
// Liu et al. 2025, "ChunkKV: Semantic-Preserving KV Cache Compression for Efficient Long-Context
// LLM Inference", arXiv 2502.00299). Per layer, with C = chunk_length, m =
// low_entropy_chunk_length:
//   s(j) = Σ over KV heads of the wrapped scorer's scores (rounded to bf16 for bf16 models, as
//          torch sums a bf16 tensor), then in f32;
//   budget B = max(1, floor(L·(1−cr)));
//   chunks [cC, min(cC+C, L)); chunk score μ_c = mean of s over the chunk;
//   chunk entropy: t = s − min(0, min_chunk s) (shift only when the chunk has a negative score),
//          p = t / (Σ t + 1e−8), e_c = clamp(−Σ p·log(p + 1e−8) / log ℓ_c, 0, 1) (ℓ_c the chunk's
//          length; a trailing chunk of one token has e = 0);
//   thresholds: μ* = median of μ, e* = median of e (torch.median: the LOWER middle value);
//   greedy over chunks by descending μ (torch.argsort), while B > 0: n = min(ℓ_c, B), and
//          n = min(n, m) when μ_c ≥ μ* and e_c < e* ("important but spiky"); keep the whole chunk
//          when n = ℓ_c, else its n best tokens by s (torch.topk); B −= n;
//   top-up: if B > 0, the B best not-yet-kept tokens by s.
// The kept set (exactly the budget, unless every token is kept) is the same for every KV head,
// ascending. kvpress reads batch element 0; a cell is one sequence.
#pragma once

#include <memory>

#include "methods/method.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

// The kept positions of one layer from its head-summed token scores s [L].
std::vector<std::int32_t> entropy_gated_chunk_selection(std::span<const float> token_scores,
                                                        std::int64_t budget, int chunk_length,
                                                        int low_entropy_chunk_length);

class EntropyGatedChunkKvMethod : public ScorerWrapperMethod {
 public:
  EntropyGatedChunkKvMethod(std::shared_ptr<const Scorer> scorer, int chunk_length,
                            int low_entropy_chunk_length);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;

 private:
  int chunk_length_;
  int low_entropy_chunk_length_;
};

}  // namespace kvaudit::methods
