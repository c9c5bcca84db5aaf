// ModelWeights: one decoder model in HF layout, ready for a backend.
//
// Layout conventions (the same for every source format):
//  * Linear weights are row-major [out, in] (HF layout); y = x · Wᵀ.
//  * Q/K rows are in HF order, i.e. rotate-half (NeoX) RoPE pairs (j, j + head_dim/2). GGUF
//    llama-arch files store Q/K permuted for interleaved RoPE; the GGUF loader undoes that.
//  * Values are held as f32. When config.dtype is bf16 every value is exactly representable in bf16
//    (the checkpoint's bf16 bits widened), so the backend's bf16 emulation sees the true weights.
//  * GGUF quantized tensors (q8_0, q4_0, q4_1) are dequantized to f32 at load.
#pragma once

#include <string>
#include <vector>

#include "runners/model/model_config.h"

namespace kvaudit::model {

struct LayerWeights {
  std::vector<float> input_norm;           // [hidden]
  std::vector<float> q_proj;               // [num_heads * head_dim, hidden]
  std::vector<float> k_proj;               // [num_kv_heads * head_dim, hidden]
  std::vector<float> v_proj;               // [num_kv_heads * head_dim, hidden]
  std::vector<float> q_bias;               // [num_heads * head_dim] or empty
  std::vector<float> k_bias;               // [num_kv_heads * head_dim] or empty
  std::vector<float> v_bias;               // [num_kv_heads * head_dim] or empty
  std::vector<float> o_proj;               // [hidden, num_heads * head_dim]
  std::vector<float> post_attention_norm;  // [hidden]
  std::vector<float> gate_proj;            // [intermediate, hidden]
  std::vector<float> up_proj;              // [intermediate, hidden]
  std::vector<float> down_proj;            // [hidden, intermediate]
};

struct ModelWeights {
  ModelConfig config;
  std::string source;                // the path it was loaded from (for messages and provenance)
  std::vector<float> embed_tokens;   // [vocab, hidden]
  std::vector<LayerWeights> layers;  // [num_layers]
  std::vector<float> final_norm;     // [hidden]
  std::vector<float> lm_head;        // [vocab, hidden]; empty when config.tie_word_embeddings

  // The output projection actually used (lm_head, or embed_tokens when tied).
  const std::vector<float>& output_projection() const {
    return lm_head.empty() ? embed_tokens : lm_head;
  }
};

}  // namespace kvaudit::model
