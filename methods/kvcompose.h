// KVCompose: attention-guided, layer-adaptive composite tokens. Akulov, Sana, De Domenico,
// Si Salem, Piovesan, Ayed 2025, "KVCompose: Efficient Structured KV Cache Compression with
// Composite Tokens", arXiv 2509.05165; kvpress 0.5.5 kvpress/presses/kvcompose_press.py
// KVComposePress.
//
// Which attention (kvpress's hook): after the prefill of the b cached tokens c_0..c_{b-1}, the
// SAME b tokens are run once more on top of that cache, at positions b..2b-1 (kvpress's "task"
// prompts; its pipeline never registers any, so the task is the repeated context). In every
// layer ℓ each query head h of that second forward gives eager attention weights
//   a_h(t, j) = softmax_c( q_{h,t} · k_c / √d ),  c over the b cached keys and the repeated rows'
//               own keys 0..t (causal), j < b the cached positions,
// (the prefill's own square attention is not used). This is our extra pass (methods/extra_pass.h):
// one chunk, the cached tokens themselves.
//   task:    A_h(j)   = agg_task over rows t of a_h(t, j)            (max or mean)
//   group:   s_g(j)   = agg_group over the query heads h of KV group g of A_h(j)
//   v-norm:  s_g(j) ← s_g(j) · ‖v_{g,j}‖₂                          (add_v_norm)
//   mean:    s_g(j) ← s_g(j) + (1/Hkv) Σ_{g'} s_{g'}(j)             (add_mean_across_heads)
// Composite tokens: sort each head's scores descending, σ_{ℓ,g}(r) = its r-th best score. The r-th
// composite token of layer ℓ gathers the r-th best position of every head, with score
//   C_ℓ(r) = agg_head over g of σ_{ℓ,g}(r)                          (max or mean)
// and +1e9 for r < keep_token_lower_bound (also added to σ_{ℓ,g}(r)); then C_0(r) ← max over ℓ of
// C_ℓ(r) (kvpress lets the first layer keep the most).
//   structured (default): N = n_layers·b composite tokens, n = max(1, floor(N·(1−cr))); layer ℓ
//     keeps k_ℓ = max(#{r : C_ℓ(r) in the global top-n}, max(1, keep_token_lower_bound)) (capped
//     at b), and EVERY head g of layer ℓ keeps its own k_ℓ best positions (top-k of s_g).
//   unstructured: N = n_layers·Hkv·b, n as above over all σ_{ℓ,g}(r); head (ℓ, g) keeps
//     k_{ℓ,g} = #{r : σ_{ℓ,g}(r) in the global top-n} of its best positions.
// Kept sets: a composite token is not an original position (kvpress stacks each head's kept rows
// in position order), so the kept set of head (ℓ, g) is the set of original positions that head
// keeps; post-RoPE keys keep their positions. Ties: torch's CPU topk order (top_k.h) for the
// global rankings and each head's top-k (kvpress: argsort; they differ only on exact ties at a
// head's boundary).
//
// Numerics (model_is_bf16): HF eager's rounding points: q·k and ×(1/√d) rounded to bf16, the
// softmax in f32 rounded to bf16; agg_task mean sums a head's bf16 weights (f32 accumulation,
// bf16 result) and divides by bf16(T); ‖v‖ rounded to bf16. Everything after the task aggregation
// is f32, as kvpress's score tensors are. In f32 nothing is rounded.
//
// Deviations: kvpress 0.5.5 with add_v_norm=True raises a shape error (the cache holds the 2b rows
// of the repeated pass when it reads the values); we use the values of the b cached positions,
// the evident intent (the golden patches kvpress likewise, tools/golden/kvpress_groups/
// kvcompose.py). kvpress's unstructured mode masks (attention_patch.py) and leaves the repeated
// rows in its cache; kvaudit evicts and never keeps them. kvpress forces eager attention for both
// forwards; our pass runs with the unit's attention backend (eager or sdpa: an sdpa unit's pass
// hidden states differ in the last bits). The CUDA engine cannot run the pass
// (InferenceEngine::observed_pass refuses; the cell fails with that message).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "methods/extra_pass.h"
#include "methods/method.h"
#include "methods/method_params.h"

namespace kvaudit::methods {

// Per-layer and per-head kept counts of one selection (both computed as kvpress does).
struct KvcomposeCounts {
  std::vector<std::int64_t> per_layer;              // structured: k_ℓ (floor applied)
  std::vector<std::vector<std::int64_t>> per_head;  // unstructured: k_{ℓ,g}
};

class KvcomposeMethod final : public Method, public ExtraPass {
 public:
  // Throws std::invalid_argument for keep_token_lower_bound < 0.
  explicit KvcomposeMethod(KvcomposeParams params);

  // Method
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  const ExtraPass* extra_pass() const override { return this; }
  std::string name() const override { return "kvcompose"; }

  // ExtraPass (agg_task and agg_group are folded in by observe(): they enter the key; the rest
  // only changes the selection)
  std::string pass_key() const override;
  std::vector<PassChunk> chunks(std::span<const std::int32_t> cached_tokens,
                                const PassPrompt& prompt) const override;
  void observe(const LayerCapture& cached, const PassChunk& chunk, const PassLayerView& rows,
               ExtraPassResult& result) const override;

  // s_g(j) after add_v_norm / add_mean_across_heads: [layers, Hkv, b] from the pass's group
  // scores and each layer's cached values.
  std::vector<float> token_scores(const ExtraPassResult& pass,
                                  std::span<const LayerCapture> layers) const;
  // The counts from token scores [layers, Hkv, length] at compression cr.
  KvcomposeCounts counts(std::span<const float> scores, int n_layers, int kv_heads, int length,
                         double compression) const;
  // The kept sets from token scores (structured or not).
  Selection select_from_scores(std::span<const float> scores, int n_layers, int kv_heads,
                               int length, double compression) const;

  const KvcomposeParams& params() const { return params_; }

 private:
  KvcomposeParams params_;
};

}  // namespace kvaudit::methods
