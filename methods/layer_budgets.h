// Per-layer budget helpers shared by the layer-budget methods (CAKE, SqueezeAttention): each gives
// layer ℓ of an N-layer model its own kept count n_ℓ per KV head, with the cell's total preserved
// exactly: Σ_ℓ n_ℓ = N · kept_count(L, cr).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "methods/method.h"

namespace kvaudit::methods {

// Makes every budget lie in [floor_value, cap] and their sum equal `total` (which must lie in
// [N·floor_value, N·cap]; throws std::invalid_argument otherwise). First clamps each budget into
// [floor_value, cap]; then, while the sum differs from `total` by d ≠ 0, spreads d evenly over the
// layers that can still move in that direction (below cap when d > 0, above floor_value when
// d < 0): each gets ⌊|d|/m⌋ and the first |d| mod m of them in layer order one more, limited by
// cap / floor_value; repeats until the sum is `total`. Budgets already in range whose sum is
// `total` are returned unchanged.
std::vector<std::int64_t> fit_layer_budgets(std::vector<std::int64_t> budgets, std::int64_t total,
                                            std::int64_t floor_value, std::int64_t cap);

// A Budget whose kept_count(L, ·) is exactly n (1 ≤ n ≤ L): compression 1 − n/L, nudged by one ulp
// at a time until the floor in kept_count lands on n. Budget-aware scorers (StreamingLLM,
// CriticalKV) then score a layer for its own kept count.
Budget budget_for_kept(std::int64_t length, std::int64_t n);

// kept[head] = the top `n_kept` positions of each KV head's scores among positions 0..scored-1
// (ties as torch's CPU topk, top_k.h) followed by every position scored..L-1 (a protected recent
// window), ascending. scores: [Hkv, scored] row-major.
std::vector<std::vector<std::int32_t>> top_k_plus_window(std::span<const float> scores,
                                                         int num_kv_heads, int scored, int length,
                                                         std::int64_t n_kept);

}  // namespace kvaudit::methods
