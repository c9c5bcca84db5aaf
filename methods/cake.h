// CakeMethod: CAKE, cascading and adaptive KV cache eviction with layer preferences (Qin et al.,
// ICLR 2025, "CAKE: Cascading and Adaptive KV Cache Eviction with Layer Preferences"; official code
// antgroup/cakekv @c4675ce, cake/model/modify_llama.py `llama_attn_forward_cake`,
// cake/cake_cache.py `CakeprefillKVCache`, cake/utils.py `adjust_budgets`). Not in kvpress 0.5.5.
//
// Per layer ℓ, with the window attention A_h(r, j) of the last w queries over all L keys
// (window_attention.h: causal, fp32 softmax, rounded to bf16 in bf16 mode) and P = L − w:
//   spatial dispersion  D_ℓ = −Σ_{h, r, j<P} A_h(r, j) · ln(A_h(r, j) + 1e-10)
//   temporal shift      V_ℓ = Σ_{j<P} Σ_h var_r A_h(r, j)          (unbiased variance over r)
//   preference          P_ℓ = D_ℓ^(1/τ1) · V_ℓ^(1/τ2)
//   eviction indicator  I_h(j) = mean_r A_h(r, j) + γ · var_r A_h(r, j),  j < P,
//                       avg-pooled with kernel k (zero padding, divided by k), then averaged over
//                       the query heads of each KV head.
// Budget (the cell's n_kept = kept_count(L, cr) per layer and KV head, total N·n_kept):
//   total_P = N·(n_kept − w);  raw_ℓ = P_ℓ / Σ P · total_P;
//   b_ℓ = adjust_budgets(raw, total_P, P) exactly as the official code: truncate, cap at P and
//         spread the capped excess evenly over the uncapped layers (remainder to the first in layer
//         order), then spread total_P − Σ b evenly (remainder to the first layers in order) over
//         the layers below P (if short) or above 1 (if over);
//   then fit_layer_budgets(b, total_P, 0, P) (layer_budgets.h), which changes nothing unless the
//   official rounding left a layer above P (the official code then silently caps it and keeps
//   fewer than total_P; we give the surplus to the layers below P, so Σ_ℓ b_ℓ = total_P always).
//   Layer ℓ keeps, per KV head, its b_ℓ highest indicator positions among 0..P−1 (ties as torch's
//   CPU topk) and the whole window P..L−1: Σ_ℓ (b_ℓ + w) = N·n_kept.
// bf16 mode rounds as torch does on the official bf16 tensors: var, the head and position sums of
// V and V^(1/τ2); the mean, variance, γ·var, their sum, the pooling and the group mean of I. D is
// computed from the bf16 probabilities in fp32 (here in double).
// Deviations: (1) cascading (use_cascading, the memory-bounded layer-by-layer schedule) is not
// emulated: we see every layer at once and apply the final allocation, which is what the official
// non-cascading path (its default in pred_cake.py) computes; cascading re-evicts earlier layers to
// their shrinking budgets, and nested top-k of the same indicator gives the same sets except where
// a budget's rounding first dips below its final value. (2) The official code does not compress
// when L ≤ cache_size + w; like kvpress we always apply the cell's budget. (3) n_kept ≤ w: every
// layer keeps its last n_kept positions (the official code assumes cache_size > w). (4) Σ P not
// finite or ≤ 0 (e.g. one-hot attention everywhere): the layers share total_P evenly.
// raw_ℓ is computed in float32 as the official numpy float32 scalars are (s = Σ P_ℓ in order,
// raw_ℓ = (P_ℓ / s) · total_P), so truncation lands where the official code's does.
// Agreement with the official code itself (its attention forward and cache classes run on random
// tensors of 6 layers; 3 f32 cases and 1 bf16; tests/golden/layer_budgets/official.json):
// identical budgets and kept sets.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "methods/method.h"

namespace kvaudit::methods {

// Parameters: CakeParams (method_params.h).

struct CakeLayerStatistics {
  double dispersion = 0.0;       // D_ℓ
  double shift = 0.0;            // V_ℓ
  double preference = 0.0;       // P_ℓ
  std::vector<float> indicator;  // I: [Hkv, P] row-major
};

// D, V, P and I of one layer (check_window(layer, w) must pass: w < L).
CakeLayerStatistics cake_layer_statistics(const LayerCapture& layer, const CakeParams& params);

// The official adjust_budgets on raw (float) budgets: see the header comment.
std::vector<std::int64_t> cake_adjust_budgets(std::span<const double> raw, std::int64_t total,
                                              std::int64_t cap);

// b_ℓ for preferences P_ℓ, total_P and cap P (adjust_budgets, then fit_layer_budgets).
std::vector<std::int64_t> cake_layer_budgets(std::span<const double> preferences,
                                             std::int64_t total, std::int64_t cap);

class CakeMethod : public Method {
 public:
  explicit CakeMethod(CakeParams params);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  int window_needed() const override { return params_.window; }
  std::string name() const override { return "cake"; }

 private:
  CakeParams params_;
};

}  // namespace kvaudit::methods
