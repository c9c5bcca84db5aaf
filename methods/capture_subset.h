// CaptureSubset: a LayerCapture restricted to some positions of each KV head, in a given order —
// what a kvpress press sees when it scores an already pruned (ComposedPress's later presses) or
// sliced (ChunkPress's chunks) cache. Keys and values are gathered into storage owned here; the
// query-side fields (window queries, query moments, o_proj, RoPE frequencies) are the layer's own,
// because kvpress recomputes them from the unchanged hidden states. Attention column sums and the
// all-queries rows describe the full cache and are dropped (a scorer that needs them is refused by
// the wrappers, see reads_only_subset_fields).
//
// Index i of the subset of head h is original position positions[h][i]; every head holds the
// same count (ScorerPress-style pruning keeps n_kept per head), which is the subset's `length`.
// When that count is below the layer's window rows, the last `count` window rows are kept
// (LayerCapture's window_rows ≤ L).
#pragma once

#include <cstdint>
#include <vector>

#include "methods/method.h"

namespace kvaudit::methods {

class CaptureSubset {
 public:
  // positions[h] (h < num_kv_heads): the original positions of head h, all lists of one size.
  CaptureSubset(const LayerCapture& layer, std::vector<std::vector<std::int32_t>> positions);
  CaptureSubset(const CaptureSubset&) = delete;
  CaptureSubset& operator=(const CaptureSubset&) = delete;

  const LayerCapture& view() const { return view_; }
  const std::vector<std::vector<std::int32_t>>& positions() const { return positions_; }

 private:
  std::vector<std::vector<std::int32_t>> positions_;
  std::vector<std::vector<float>> keys_;
  std::vector<std::vector<float>> values_;
  std::vector<float> window_queries_;  // only when the subset is shorter than the window rows
  LayerCapture view_;
};

// Whether `scorer` reads only what a CaptureSubset carries faithfully: keys, values, window
// queries, o_proj, RoPE frequencies — not column sums, query moments, all-queries rows or the
// attention input (these are tied to the full cache's positions).
bool reads_only_subset_fields(const Scorer& scorer);

// The positions [begin, end) of every head of `layer`, in order.
std::vector<std::vector<std::int32_t>> position_range(const LayerCapture& layer, std::int32_t begin,
                                                      std::int32_t end);

}  // namespace kvaudit::methods
