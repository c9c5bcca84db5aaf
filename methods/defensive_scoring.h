// DefensiveKV per-layer scoring, shared by DefensiveKV and Layer-DefensiveKV (they differ only in
// how the scores are selected). Source: FFY0/DefensiveKV @9251b95,
// kvpress/presses/efficient_defensivekv_press.py `score` + `vwl1norm_triton` (identical scoring
// in efficient_layer_defensivekv_press.py); paper: Feng et al. 2025, "Taming the Fragility of KV
// Cache Eviction in LLM Inference", arXiv 2510.13334. Restated in
// docs/design/original-methods.md §DefensiveKV scoring. Notation: L candidates, w window,
// P = L − w scored prefix tokens, G = H / Hkv, group(k) = the G query heads of KV head k.
//
//   1. A_h(i, j)  = softmax_j(q_{h,i}·k_j/√d + causal mask) over all L keys for the last w queries
//                   (methods/window_attention.h; fp32 softmax cast to bf16 in bf16 mode), j < P.
//   2. Ã_h(i, ·)  = avg_pool1d(A_h(i, ·), kernel 5, pad 2, count_include_pad) per window row, then
//                   rescaled to the row's original mass: Ã·Σ_j A_h(i, j)/Σ_j Ã_h(i, j).
//   3. m_k(j)     = max over g ∈ group(k), i < w of Ã_g(i, j)          (defensive worst case)
//      μ_k        = mean over j < P of m_k(j)
//      s_k(j)     = max(m_k(j), μ_k)                                    (lift to the mean)
//   4. N_h(j)     = ‖V_{k(h), j}·W_o^{(h)}‖₁, W_o^{(h)} = o_proj.weightᵀ rows h·d..h·d+d−1 (d × D)
//      n_k(j)     = mean over g ∈ group(k) of N_g(j)
//      ν_k(j)     = n_k(j) / Σ_{k'} n_{k'}(j)        (normalised ACROSS KV heads, per token)
//      s'_k(j)    = s_k(j)·ν_k(j)
//   5. CriticalKV stage 1: ā_k(j) = mean over group and window of the UNPOOLED A; p_k = ā_k/Σ_j
//   ā_k;
//      sort p_k descending; c_k = the number of tokens before the first cumulative sum ≥ τ,
//      τ = 0.9 − b, b = mean over heads and window rows of Σ_{j∈[P−w, P)} A_h(i, j);
//      c_k ≤ int(P·(1 − cr) − w); the top c_k tokens by p_k get s' = M = max of s' over the layer.
//   6. The w window positions get M.
//
// Code quirks reproduced:
//   - window bias: b is taken after the window columns were sliced off, so it is the mass on the w
//     keys just BEFORE the window ([P−w, P), or [0, P) when P < w), not the window's self-mass.
//   - c_k is the count strictly before the crossing (argmax of the boolean mask), so the crossing
//     token itself is not forced; a row that never crosses gives argmax = 0, i.e. c_k = 0.
//   - the c_k clamp is int(P·(1 − cr) − w) on the PREFIX length P (values[..., :-w]), truncated
//     toward zero, in double (Python float).
//   - protection is max, NOT max + 1 (kvpress's later convention): forced, window and the naturally
//     highest tokens tie at M; selection breaks ties to the lower flat index (top_k.h).
//   - the value norm covers the prefix only (values[..., :-w]); ν divides by the sum over KV heads
//     (dim −2), not over tokens.
// Not reproduced: when P·(1 − cr) − w ≤ −1 the original clamps c_k to a NEGATIVE count and the
// slice sorted_indices[:c_k] then forces all but |c_k| tokens; we clamp at 0 (no forcing), since
// that slice is an artifact (it needs L·(1 − cr) < w, far outside the paper's settings).
// Precision (scores in fp32): A follows the reference's dtype (fp32 softmax, rounded to bf16
// in bf16 mode, as the code casts it back to the model dtype); pooling, max, mean, value norms
// and the cumulative sums run in fp32/double, where the original runs them in the model dtype.
// Stage 1 sorts p_k stably (ties to the lower position); torch.sort's order among ties is
// unspecified.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "methods/layer_capture.h"

namespace kvaudit::methods {

inline constexpr int kDefensivePoolKernel = 5;          // avg_pool1d kernel_size (code default)
inline constexpr double kDefensiveMassThreshold = 0.9;  // CriticalKV stage-1 cumulative mass

// Everything DefensiveKV computes for one layer; the intermediates are kept for tests and
// diagnostics. Per-prefix arrays are [Hkv, P] row-major; `scores` is [Hkv, L].
struct DefensiveLayerScores {
  int num_kv_heads = 0;
  int length = 0;                          // L
  int window = 0;                          // w
  std::vector<float> worst_case;           // m_k(j)
  std::vector<float> head_mean;            // μ_k, [Hkv]
  std::vector<float> defensive;            // s_k(j) = max(m_k(j), μ_k)
  std::vector<float> value_share;          // ν_k(j)
  std::vector<float> mass_share;           // p_k(j), the stage-1 distribution
  double window_bias = 0.0;                // b
  std::vector<std::int64_t> forced_count;  // c_k after the clamp, [Hkv]
  float protect_value = 0.0f;              // M
  std::vector<float> scores;               // final flattened scores, kv_head·L + j (higher = keep)

  int prefix() const { return length - window; }
};

// Steps 1–6 for one layer. `compression` (cr) only enters the c_k clamp. Validates the capture
// (window rows, L > w, o_proj) and throws std::invalid_argument naming `method`.
DefensiveLayerScores score_defensive_layer(const LayerCapture& layer, int window,
                                           double compression, const std::string& method);

// Checks a compression ratio in [0, 1); throws std::invalid_argument naming `method`.
void check_defensive_compression(double compression, const std::string& method);

// Kept positions of one layer's flattened scores ([Hkv, L]) given the `count` best entries over
// all its heads: per-head ascending position lists (ties to the lower flat index).
std::vector<std::vector<std::int32_t>> split_flat_top_k(std::span<const float> scores,
                                                        int num_kv_heads, int length,
                                                        std::int64_t count);

}  // namespace kvaudit::methods
