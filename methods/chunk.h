// ChunkMethod: independent ScorerPress compression of fixed-size chunks (kvpress 0.5.5
// kvpress/presses/chunk_press.py ChunkPress, after FINCH: Corallo & Papotti 2024, "FINCH:
// Prompt-guided Key-Value Cache Compression for Large Language Models", TACL 12):
//   the L positions are cut into chunks [i, i+C), C = chunk_length, the last one partial;
//   chunk c of length ℓ_c is scored ALONE by the wrapped scorer (the scorer sees only the chunk's
//   keys and values: KeyDiff's anchor is the chunk's mean key, StreamingLLM's sinks are the chunk's
//   first tokens) and each KV head keeps its max(1, floor(ℓ_c·(1−cr))) best positions of the chunk
//   (ties as torch.topk, top_k.h); the kept set is the union over chunks, ascending.
// So the layer keeps Σ_c max(1, floor(ℓ_c(1−cr))) per head, not kept_count(L, cr).
// Scorers: kvpress hands each chunk's hidden states to the press but the FULL sequence's rotary
// embeddings, so a window scorer (SnapKV, TOVA) would rotate a chunk's queries with the positions
// of the sequence's last tokens; only the final chunk is then what the scorer computes on a prefix.
// We accept window scorers only when there is a single chunk (L ≤ C), and never scorers reading
// column sums, query moments or all-queries rows (those describe the whole prefill); this is
// checked at selection time with a message naming the scorer.
#pragma once

#include <memory>

#include "methods/method.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

class ChunkMethod : public ScorerWrapperMethod {
 public:
  ChunkMethod(std::shared_ptr<const Scorer> scorer, int chunk_length);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;

 private:
  int chunk_length_;
};

}  // namespace kvaudit::methods
