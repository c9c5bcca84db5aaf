// PrefillObserver: the hook through which eviction methods see a layer's tensors during prefill.
//
// CpuModel::prefill calls on_layer once per decoder layer, after the layer's keys and values are in
// the cache and before its attention runs. The view's spans point into the model's working buffers
// and are valid only during the call; an observer copies what it needs. Nothing is copied for an
// observer that is absent, and the pre-RoPE queries and keys are kept only if
// wants_pre_rope_queries().
// Observers must not modify the SequenceState being prefilled.
//
// Values are what the forward computes (bf16-representable in bf16 mode). Layout is token-major:
// row t holds every head of token t, as HF's [T, heads·head_dim] projections before the transpose.
#pragma once

#include <cstdint>
#include <span>

namespace kvaudit::cpu {

struct PrefillLayerView {
  int layer = 0;
  int num_tokens = 0;  // T: tokens in this prefill call
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  std::span<const std::int32_t> positions;  // [T] original positions of these tokens
  std::span<const float> queries_pre_rope;  // [T, num_heads, head_dim]; empty unless requested
  std::span<const float> keys_pre_rope;     // [T, num_kv_heads, head_dim]; empty unless requested
  std::span<const float> queries;           // [T, num_heads, head_dim], post-RoPE
  std::span<const float> keys;              // [T, num_kv_heads, head_dim], post-RoPE
  std::span<const float> values;            // [T, num_kv_heads, head_dim]
  std::span<const float> attention_input;   // [T, hidden]: input_layernorm output (q/k/v input)
  std::span<const float> rope_cos;          // [T, head_dim] the rows' RoPE cos/sin as applied
  std::span<const float> rope_sin;          // (bf16-rounded in bf16 mode)
};

class PrefillObserver {
 public:
  virtual ~PrefillObserver() = default;
  // Whether views should carry the pre-RoPE queries and keys (costs one copy of Q and K per layer).
  virtual bool wants_pre_rope_queries() const { return false; }
  virtual void on_layer(const PrefillLayerView& view) = 0;
  // Whether on_attention_residual is called (costs one copy of the residual stream per layer).
  virtual bool wants_attention_residual() const { return false; }
  // Called once per layer after the self-attention block's residual add: `before` is the residual
  // stream x entering the layer, `after` = x + o_proj(attention) as the model rounds it, both
  // [T, hidden] token-major; valid only during the call.
  virtual void on_attention_residual(int layer, std::span<const float> before,
                                     std::span<const float> after) {
    (void)layer;
    (void)before;
    (void)after;
  }
};

}  // namespace kvaudit::cpu
