// Test-local eviction methods for the unit runner's tests: small, readable Method implementations
// that exercise every part of a LayerCapture (keys, window queries, column sums, query moments),
// ragged per-head budgets, and the failure paths (a method that throws, one that returns a
// position outside the candidates). They are not the real kvpress scorers (methods/).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "methods/method.h"

namespace kvaudit::unit::testing {

// Scores of one layer: scores[kv_head * L + j]; higher = keep.
enum class TestScore {
  key_norm,          // −‖k_j‖ (keys only)
  window_attention,  // Σ over the group's heads and the last 8 window rows of q·k_j
  column_sums,       // Σ over the group's heads of column_sums[h, j] / (L − j)
  query_moments,     // k_j · Σ_h query_sum[h] over the group (pre-RoPE mean direction)
};

// Per KV head top-n_kept (n_kept = max(1, floor(L·(1−cr)))), ties to the lower position; with
// `layer_wide`, one top-(n_kept·Hkv) over the whole layer instead (ragged head budgets,
// AdaKV-like).
std::unique_ptr<methods::Method> make_top_k_method(TestScore score, bool layer_wide = false);
// Keeps positions j with (j + layer + kv_head) even, whatever the budget (ragged, L-dependent).
std::unique_ptr<methods::Method> make_keep_alternate_method();
// Keeps everything (the cache must then equal the uncompressed one).
std::unique_ptr<methods::Method> make_keep_all_method();
// Throws std::invalid_argument from select().
std::unique_ptr<methods::Method> make_throwing_method();
// Returns position L (not a candidate) for layer 0, KV head 0.
std::unique_ptr<methods::Method> make_out_of_range_method();

}  // namespace kvaudit::unit::testing
