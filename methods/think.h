// ThinkMethod: key-channel pruning (Xu et al. 2024, "ThinK: Thinner Key Cache by Query-Driven
// Pruning", arXiv 2407.21018; kvpress 0.5.5 kvpress/presses/think_press.py ThinKPress). ThinK
// keeps every position and zeroes, in each (layer, KV head), the key channels whose
// query-weighted energy is lowest:
//   w = min(window_size, L) window rows (the last w queries before the boundary, post-RoPE:
//       LayerCapture::window_queries, the same rows kvpress recomputes from the hidden states with
//       the model's q projection and RoPE),
//   q̄_g(d) = mean over the w rows and the G query heads of KV head g of q(d)²,
//   k̄_g(d) = mean over the positions the cache holds of head g of k(d)²,
//   score_g(d) = q̄_g(d) · k̄_g(d),
//   the n = floor(head_dim · key_channel_compression_ratio) channels of lowest score are zeroed in
//   every key of head g (torch.topk(largest=False) tie order: methods/top_k.h on −score).
// Nothing is pruned when the ratio is 0 (kvpress returns the cache unchanged). bf16 models round as
// torch does on bf16 tensors: each square, each mean (one rounding of the f32-accumulated sum over
// the count) and the product are rounded to bf16.
//
// select() keeps all positions 0..L−1 of every head and fills Selection::zeroed_key_channels; the
// unit runner then calls SequenceCache::zero_key_channels, which zeroes them in the cache and
// counts their bytes as freed (kvpress only zeroes them: its cache keeps its shape).
//
// Budget: ThinKPress has no settable compression ratio; it reports
//   compression_ratio = key_channel_compression_ratio / 2   (keys are half the cache),
// so a `think` cell must ask for exactly that compression (catalog fixed_compression, as for
// composed and per_layer_compression; checked at plan time and again by select()). The bytes the
// cache frees are floor(d·ratio)/(2d) of it, which equals the reported ratio when d·ratio is whole.
//
// With a position press: kvpress combines ThinK with a pruning press through ComposedPress
// ([SnapKVPress(r), ThinKPress(k)]): ThinK then scores the channels on the keys the first press
// kept (k̄ over the kept positions only), with the window queries of the full prefill (kvpress
// recomputes them from the unchanged hidden states). ComposedMethod (composed.h) runs that through
// zeroed_channels() below. ThinK must be the last press (a press after it would score zeroed
// keys, which the capture does not hold).
#pragma once

#include <cstdint>
#include <vector>

#include "methods/method.h"

namespace kvaudit::methods {

// Parameters: ThinkParams (method_params.h).

// score_g(d) of every KV head g of one layer, [Hkv · d] row-major; k̄ averages the positions
// kept[g] (strictly ascending, each in [0, L)), or all L positions when `kept` is null. Throws
// std::invalid_argument (naming "think") if the capture has fewer than min(window_size, L) window
// rows.
std::vector<float> think_channel_scores(const LayerCapture& layer, int window_size,
                                        const std::vector<std::vector<std::int32_t>>* kept);

// The n lowest-scored channels of one head's d scores, ascending (torch topk(largest=False) order).
std::vector<std::int32_t> lowest_channels(std::span<const float> head_scores, std::int64_t n);

class ThinkMethod : public Method {
 public:
  explicit ThinkMethod(ThinkParams params);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  int window_needed() const override { return params_.window_size; }
  std::string name() const override { return "think"; }

  // kvpress's reported compression_ratio: key_channel_compression_ratio / 2.
  double reported_compression() const { return params_.key_channel_compression_ratio / 2.0; }
  // floor(head_dim · key_channel_compression_ratio), as kvpress's int().
  std::int64_t pruned_channel_count(int head_dim) const;
  // The channels zeroed per KV head of one layer whose heads hold `kept` (null: all positions);
  // every list empty when nothing is pruned.
  std::vector<std::vector<std::int32_t>> zeroed_channels(
      const LayerCapture& layer, const std::vector<std::vector<std::int32_t>>* kept) const;

 private:
  ThinkParams params_;
};

}  // namespace kvaudit::methods
