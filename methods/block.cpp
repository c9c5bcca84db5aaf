// BlockMethod (block.h).
#include "methods/block.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/capture_checks.h"
#include "methods/capture_subset.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"

namespace kvaudit::methods {

BlockMethod::BlockMethod(std::shared_ptr<const Scorer> scorer, int block_size)
    : ScorerWrapperMethod("block", std::move(scorer)), block_size_(block_size) {
  if (!scorer_) throw std::invalid_argument("block: null scorer");
  if (block_size < 1) throw std::invalid_argument("block: block_size must be >= 1");
}

Selection BlockMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                              const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  Selection selection;
  if (budget.compression == 0.0) {  // kvpress returns before the block loop
    std::vector<std::int32_t> all(static_cast<std::size_t>(L));
    std::iota(all.begin(), all.end(), 0);
    for (const auto& layer : layers)
      selection.kept.emplace_back(static_cast<std::size_t>(layer.num_kv_heads), all);
    return selection;
  }
  const std::int64_t n_kept = kept_count(L, budget.compression);
  const std::int64_t block = block_size_ < L ? block_size_ : L;
  if (n_kept + block >= L) {
    // At most one step, whose candidates are 0..L−1 in order: the scorer's own top-k over the
    // whole layer (any scorer; kvpress's gathered hidden states are then the layer's own).
    for (const auto& layer : layers) {
      const auto scores = score_layer(*scorer_, layer, budget, context);
      selection.kept.push_back(per_head_top_k(scores, layer.num_kv_heads, L, n_kept));
    }
    return selection;
  }
  if (!reads_only_subset_fields(*scorer_) || scorer_->window_needed() > 0)
    throw std::invalid_argument(
        name() + ": with L = " + std::to_string(L) + ", " + std::to_string(n_kept) +
        " kept and blocks of " + std::to_string(block) + " the scorer '" + scorer_->name() +
        "' would score blocks with queries, attention sums or a window that kvpress's "
        "BlockPress does not restrict to the block's candidates; block takes scorers that read "
        "only keys and values (knorm, keydiff, cur, lagkv, streaming_llm) unless one step "
        "covers the prefill (block_size >= L - n_kept)");
  SelectionContext block_context = context;
  block_context.memo = nullptr;  // a block's scores are not the layer's scores
  for (const auto& layer : layers) {
    const auto heads = static_cast<std::size_t>(layer.num_kv_heads);
    std::vector<std::int32_t> first(static_cast<std::size_t>(n_kept));
    std::iota(first.begin(), first.end(), 0);
    std::vector<std::vector<std::int32_t>> kept(heads, first);
    for (std::int64_t i = n_kept; i < L; i += block) {
      const std::int64_t end = std::min<std::int64_t>(i + block, L);
      std::vector<std::vector<std::int32_t>> candidates = kept;  // survivors, then the block
      for (auto& c : candidates)
        for (std::int64_t j = i; j < end; ++j) c.push_back(static_cast<std::int32_t>(j));
      const auto count = static_cast<std::size_t>(n_kept + (end - i));
      const CaptureSubset subset(layer, candidates);
      std::vector<float> scores(heads * count);
      scorer_->score_for_budget(subset.view(), budget, block_context, scores);
      for (std::size_t h = 0; h < heads; ++h) {
        const auto best =
            torch_top_k_ranked(std::span<const float>(scores).subspan(h * count, count), n_kept);
        kept[h].clear();
        for (const auto index : best)
          kept[h].push_back(candidates[h][static_cast<std::size_t>(index)]);
      }
    }
    for (auto& k : kept) std::sort(k.begin(), k.end());
    selection.kept.push_back(std::move(kept));
  }
  return selection;
}

}  // namespace kvaudit::methods
