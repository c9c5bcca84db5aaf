// ChunkKvMethod (chunkkv.h).
#include "methods/chunkkv.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"

namespace kvaudit::methods {

ChunkKvMethod::ChunkKvMethod(std::shared_ptr<const Scorer> scorer, int chunk_length)
    : ScorerWrapperMethod("chunkkv", std::move(scorer)), chunk_length_(chunk_length) {
  if (!scorer_) throw std::invalid_argument("chunkkv: null scorer");
  if (chunk_length < 1) throw std::invalid_argument("chunkkv: chunk_length must be >= 1");
}

Selection ChunkKvMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  const std::int64_t n_kept = kept_count(L, budget.compression);
  const std::int64_t complete = L / chunk_length_;
  const std::int64_t remaining = L % chunk_length_;
  const std::int64_t n_chunks = complete + (remaining > 0 ? 1 : 0);
  const std::int64_t chunks_kept =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(static_cast<double>(n_chunks) *
                                                                     (1.0 - budget.compression))));
  Selection selection;
  for (const auto& layer : layers) {
    const auto scores = score_layer(*scorer_, layer, budget, context);
    if (complete == 0) {
      selection.kept.push_back(per_head_top_k(scores, layer.num_kv_heads, L, n_kept));
      continue;
    }
    std::vector<float> chunk_scores(static_cast<std::size_t>(n_chunks));
    for (std::int64_t c = 0; c < n_chunks; ++c) {
      const std::int64_t begin = c * chunk_length_;
      const std::int64_t end = std::min<std::int64_t>(begin + chunk_length_, L);
      double sum = 0.0;
      for (std::int64_t j = begin; j < end; ++j) {
        // torch sums the heads first (one f32 per position), then averages the chunk.
        float head_sum = 0.0f;
        for (int h = 0; h < layer.num_kv_heads; ++h)
          head_sum += scores[static_cast<std::size_t>(h) * static_cast<std::size_t>(L) +
                             static_cast<std::size_t>(j)];
        sum += head_sum;
      }
      chunk_scores[static_cast<std::size_t>(c)] =
          static_cast<float>(sum / static_cast<double>(end - begin));
    }
    std::vector<std::int32_t> positions;
    for (const auto c : torch_top_k_positions(chunk_scores, chunks_kept)) {
      const std::int64_t begin = static_cast<std::int64_t>(c) * chunk_length_;
      const std::int64_t end = std::min<std::int64_t>(begin + chunk_length_, L);
      for (std::int64_t j = begin; j < end; ++j) positions.push_back(static_cast<std::int32_t>(j));
    }
    selection.kept.emplace_back(static_cast<std::size_t>(layer.num_kv_heads), positions);
  }
  return selection;
}

}  // namespace kvaudit::methods
