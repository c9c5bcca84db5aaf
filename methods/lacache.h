// LaCacheMethod: a ladder-shaped, query-agnostic positional pattern across layers (Shi et al., ICML
// 2025, "LaCache: Ladder-Shaped KV Caching for Efficient Long-Context Modeling of Large Language
// Models"; official code github.com/GATECH-EIC/LaCache at 0f27c33, LongBench/lacache/kv_cache.py
// LaCache.__call__, applied once to the prefill cache as LongBench/pred.py does). Not in kvpress
// 0.5.5. Every KV head of a layer keeps the same positions; no score is computed.
//
// With L candidates, N layers, C = n = kept_count(L, cr) (the official cache_size), span s,
// overlap o (0 ≤ o < s) and S = min(max_start_size, max(1, L−N−1), C−N−1) (pred.py's start_size):
// nothing is evicted when L ≤ C; otherwise, with ⌈·⌉ and // on integers as in Python,
//   before = 1 + ⌈(N−s)/(s−o)⌉    positions one ladder step spans
//   after  = min(⌈s/(s−o)⌉, before)  positions each layer keeps of a step
//   red    = before − after        positions a step removes;  C ← C + red // 2  (compensation)
//   R      = L − C (to remove);  room = C − S − N;  fits = (room // after)·red
// one pass (R ≤ fits): m = ⌈R/red⌉ steps after the start S; layer i keeps
//   [0, S) ∪ {S + i mod (red+1) + before·j + k : j < m, k < after} ∪ [S + before·m, L),
// the ladder: each layer keeps a window of `after` positions per step, shifted by its layer index
// (mod red+1), so consecutive layers cover consecutive positions;
// otherwise iterative compaction ("startover"): the pass above with m = room // after is compacted
// again t = ⌈(R − fits)/within⌉ times, within = ((C − S − N) // after)·red, which the official code
// folds into one selection from the once-laddered list λ_i:
//   before' = before + (t−1)(before−1),  red' = before' − after,  m' = ⌈(R − fits)/red'⌉
//   layer i keeps λ_i[q] for q ∈ [0, S) ∪ {S + i mod (red'+1) + before'·j + t·k : j < m',
//   k < after} ∪ [S + before'·m', |λ_i|)  (a negative q counts from the end, as Python's).
// The kept set is the set of those positions (a position the official list holds twice is kept
// once).
//
// Deviations (docs/METHODS.md):
//  * C is the cell's kept_count(L, cr); the official LongBench code uses int(budget · max_length)
//    with the dataset's max_length, which equals it when the prompt fills max_length.
//  * Only the prefill compaction is modelled (kvaudit evicts once, after the prefill); the official
//    code calls LaCache again after every generated token and re-assigns positions inside the cache
//    (its pos-shift attention), while kvaudit keeps each kept key at its original RoPE position.
//  * Where the official arithmetic is undefined (red = 0 or within = 0: a division by zero; a
//    position outside [0, L): a gather or index error — short prompts at high compression, span
//    close to the layer count) the official code raises; this method throws std::invalid_argument
//    saying which quantity fails, and the cell fails (no silent fallback).
#pragma once

#include <cstdint>
#include <vector>

#include "methods/method.h"

namespace kvaudit::methods {

// Parameters: LaCacheParams (method_params.h).

// The positions layer `layer` keeps (ascending, unique) of `length` candidates of a model with
// `num_layers` layers when `cache_size` = C of the formula above; std::invalid_argument where the
// official arithmetic is undefined.
std::vector<std::int32_t> lacache_layer_positions(std::int64_t length, int num_layers,
                                                  std::int64_t cache_size, int layer,
                                                  const LaCacheParams& params);

class LaCacheMethod : public Method {
 public:
  explicit LaCacheMethod(LaCacheParams params);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  std::string name() const override { return "lacache"; }

 private:
  LaCacheParams params_;
};

}  // namespace kvaudit::methods
