// ChunkMethod (chunk.h).
#include "methods/chunk.h"

#include <algorithm>
#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/capture_subset.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"

namespace kvaudit::methods {

ChunkMethod::ChunkMethod(std::shared_ptr<const Scorer> scorer, int chunk_length)
    : ScorerWrapperMethod("chunk", std::move(scorer)), chunk_length_(chunk_length) {
  if (!scorer_) throw std::invalid_argument("chunk: null scorer");
  if (chunk_length < 1) throw std::invalid_argument("chunk: chunk_length must be >= 1");
}

Selection ChunkMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                              const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  Selection selection;
  if (L <= chunk_length_) {  // one chunk: the scorer's own ScorerPress selection
    const std::int64_t n_kept = kept_count(L, budget.compression);
    for (const auto& layer : layers) {
      const auto scores = score_layer(*scorer_, layer, budget, context);
      selection.kept.push_back(per_head_top_k(scores, layer.num_kv_heads, L, n_kept));
    }
    return selection;
  }
  if (!reads_only_subset_fields(*scorer_) || scorer_->window_needed() > 0)
    throw std::invalid_argument(name() + ": with L = " + std::to_string(L) + " > chunk_length " +
                                std::to_string(chunk_length_) + " the scorer '" + scorer_->name() +
                                "' would score chunks with the whole prefill's queries or "
                                "positions; chunk takes scorers that read only keys and values "
                                "(knorm, keydiff, streaming_llm) unless L <= chunk_length");
  SelectionContext chunk_context = context;
  chunk_context.memo = nullptr;  // chunk scores are not the layer's scores
  for (const auto& layer : layers) {
    std::vector<std::vector<std::int32_t>> kept(static_cast<std::size_t>(layer.num_kv_heads));
    for (int begin = 0; begin < L; begin += chunk_length_) {
      const int end = std::min(L, begin + chunk_length_);
      const CaptureSubset chunk(layer, position_range(layer, begin, end));
      const auto length = static_cast<std::size_t>(end - begin);
      std::vector<float> scores(static_cast<std::size_t>(layer.num_kv_heads) * length);
      scorer_->score_for_budget(chunk.view(), budget, chunk_context, scores);
      const std::int64_t n_kept = kept_count(end - begin, budget.compression);
      for (std::size_t h = 0; h < kept.size(); ++h)
        for (const auto j : torch_top_k_positions(
                 std::span<const float>(scores).subspan(h * length, length), n_kept))
          kept[h].push_back(begin + j);
    }
    selection.kept.push_back(std::move(kept));
  }
  return selection;
}

}  // namespace kvaudit::methods
