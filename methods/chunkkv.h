// ChunkKvMethod: chunk-level selection over any scorer (Liu et al. 2025, "ChunkKV: Semantic-
// Preserving KV Cache Compression for Efficient Long-Context LLM Inference"; kvpress ChunkKVPress,
// docs/design/kvpress.md §ChunkKVPress):
//   chunks of `chunk_length` positions, the last one partial when L is not a multiple;
//   chunk score = (Σ over KV heads of the scorer's scores) averaged over the chunk's positions;
//   keep the max(1, floor(n_chunks·(1−cr))) best chunks (ties as torch.topk) — the SAME
//   positions for every KV head, ascending.
// With no complete chunk (L < chunk_length) kvpress falls back to the scorer's own per-head top-k
// (n_kept = kept_count(L, cr)); so do we. Kept counts are multiples of the chunk length, not
// n_kept.
#pragma once

#include <memory>

#include "methods/method.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

class ChunkKvMethod : public ScorerWrapperMethod {
 public:
  ChunkKvMethod(std::shared_ptr<const Scorer> scorer, int chunk_length);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;

 private:
  int chunk_length_;
};

}  // namespace kvaudit::methods
