// Gradient norms of a squared-hidden-state objective w.r.t. every layer's attention output: what
// KVgrad (methods/kvgrad.h; kvpress 0.5.5 kvpress/presses/kvgrad_press.py KVgradPress) weights
// its reconstruction attention by. The CPU runtime has no autograd; this is the hand-written
// backward of the decoder (HF LlamaDecoderLayer / Qwen2DecoderLayer, as cpu_model.cpp runs it)
// for the one objective KVgrad uses.
//
// For T rows run on top of a cache (the rows attend to the cache's entries and causally to each
// other), with h_ℓ the residual stream entering layer ℓ and
//   a_ℓ     = h_ℓ + W_O · Attn(RoPE(W_Q n_ℓ + b_Q), RoPE(W_K n_ℓ + b_K), W_V n_ℓ + b_V),
//             n_ℓ = RMSNorm(h_ℓ; w_in),
//   h_{ℓ+1} = a_ℓ + W_down (silu(W_gate m_ℓ) ⊙ W_up m_ℓ),   m_ℓ = RMSNorm(a_ℓ; w_post),
//   Φ       = Σ_t ‖h_{L,t}‖²   (h_L: the last decoder layer's output, before the final norm),
// it returns ‖∂Φ/∂a_{ℓ,t}‖₂ for every layer ℓ and row t (∂Φ/∂a is the gradient of the attention
// block's output, since a = h + output). The cache's own entries are constants (kvpress detaches
// them: ReadOnlyDynamicLayer); the rows' keys and values are not. Backward rules used:
//   RMSNorm  y = w ⊙ x·r, r = (mean x² + ε)^(−1/2):  ∂x = r·(w⊙g) − x·r³·Σ(w⊙g⊙x)/D
//   silu     s'(z) = σ(z)·(1 + z·(1 − σ(z)))
//   softmax  ∂S = P ⊙ (∂P − Σ_j P ∂P)
//   RoPE     the transpose of the rotation (rotate_half convention)
// Numerics: everything is computed in f32 (double where rows are reduced) from the forward's
// activations as the model rounded them (the MLP's inputs recomputed with the forward's own
// rms_norm and linear, unrounded); kvpress's bf16 models back-propagate in bf16, which
// this does not imitate (KVgrad's bf16 scores are then close, not equal; docs/METHODS.md §kvgrad).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runners/cpu/kv_cache.h"
#include "runners/cpu/prefill_observer.h"
#include "runners/model/model_weights.h"

namespace kvaudit::cpu {

// One layer's forward activations of the T rows, token-major.
struct GradientPassLayer {
  std::vector<float> layer_input;      // h_ℓ [T, hidden]
  std::vector<float> attention_input;  // n_ℓ [T, hidden]
  std::vector<float> queries;          // post-RoPE [T, heads, head_dim]
  std::vector<float> keys;             // post-RoPE [T, kv_heads, head_dim]
  std::vector<float> values;           // [T, kv_heads, head_dim]
  std::vector<float> after_attention;  // a_ℓ [T, hidden]
};

// What the backward needs from a forward, recorded through the PrefillObserver hooks.
class GradientPassRecorder final : public PrefillObserver {
 public:
  void on_layer(const PrefillLayerView& view) override;
  bool wants_attention_residual() const override { return true; }
  void on_attention_residual(int layer, std::span<const float> before,
                             std::span<const float> after) override;

  int num_tokens() const { return static_cast<int>(positions_.size()); }
  const std::vector<std::int32_t>& positions() const { return positions_; }
  const std::vector<float>& rope_cos() const { return cos_; }  // [T, head_dim]
  const std::vector<float>& rope_sin() const { return sin_; }
  const std::vector<GradientPassLayer>& layers() const { return layers_; }

 private:
  std::vector<std::int32_t> positions_;
  std::vector<float> cos_, sin_;
  std::vector<GradientPassLayer> layers_;
};

// [num_layers][T]: ‖∂Φ/∂a_{ℓ,t}‖₂. `cache` is the cache after the recorded forward: every layer's
// heads end with the T rows' entries (at the recorded positions). Throws std::invalid_argument
// when the record or the cache does not match the model.
std::vector<std::vector<float>> attention_output_gradient_norms(const model::ModelWeights& weights,
                                                                const GradientPassRecorder& record,
                                                                const KvCache& cache);

}  // namespace kvaudit::cpu
