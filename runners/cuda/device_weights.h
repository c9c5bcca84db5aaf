// DeviceWeights: a decoder's weights resident on the GPU in bf16, fused for the GEMMs:
//   qkv      [(H + 2·Hkv)·d, hidden]  rows of q_proj, then k_proj, then v_proj (HF layout [out,
//   in]) qkv_bias [(H + 2·Hkv)·d] or empty (Qwen2) gate_up  [2·inter, hidden]        rows of
//   gate_proj, then up_proj o_proj [hidden, H·d], down_proj [hidden, inter], norms [hidden], embed
//   [vocab, hidden], lm_head (or the tied embedding).
// Every value is model::ModelWeights' f32 value rounded to bf16 (exact for bf16 checkpoints; a
// dequantized GGUF or f32 checkpoint is rounded as transformers' torch_dtype=bfloat16 would), so
// the CPU backend in bf16 mode on cast_to_bf16(weights) computes with the same numbers.
#pragma once

#include <cstddef>
#include <vector>

#include "runners/cuda/device_buffer.h"
#include "runners/model/model_weights.h"

namespace kvaudit::cuda {

struct DeviceLayerWeights {
  DeviceBuffer<bf16> input_norm;
  DeviceBuffer<bf16> qkv;
  DeviceBuffer<bf16> qkv_bias;  // empty without attention bias
  DeviceBuffer<bf16> o_proj;
  DeviceBuffer<bf16> post_attention_norm;
  DeviceBuffer<bf16> gate_up;
  DeviceBuffer<bf16> down_proj;
};

struct DeviceWeights {
  model::ModelConfig config;  // dtype is bf16
  DeviceBuffer<bf16> embed_tokens;
  std::vector<DeviceLayerWeights> layers;
  DeviceBuffer<bf16> final_norm;
  DeviceBuffer<bf16> lm_head;  // empty when tied (use embed_tokens)

  const bf16* output_projection() const {
    return lm_head.empty() ? embed_tokens.data() : lm_head.data();
  }
  std::size_t bytes() const;
};

// Uploads (validating sizes first: model::ModelInputError naming the source and tensor).
DeviceWeights upload_weights(const model::ModelWeights& weights);

// Bytes upload_weights would take on the device (for the memory planner).
std::size_t device_weight_bytes(const model::ModelConfig& config);

// The same model with every tensor rounded to bf16 and config.dtype = bf16: what the CPU backend
// must run to be the GPU's twin (transformers' torch_dtype=bfloat16 cast).
model::ModelWeights cast_to_bf16(const model::ModelWeights& weights);

}  // namespace kvaudit::cuda
