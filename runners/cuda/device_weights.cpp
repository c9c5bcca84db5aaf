// Weight upload and the bf16 cast; see device_weights.h.
#include "runners/cuda/device_weights.h"

#include "runners/model/formats/bf16_cast.h"
#include "runners/model/weight_validation.h"

namespace kvaudit::cuda {
namespace {

DeviceBuffer<bf16> upload_concatenated(std::initializer_list<const std::vector<float>*> parts) {
  std::vector<float> joined;
  for (const std::vector<float>* part : parts)
    joined.insert(joined.end(), part->begin(), part->end());
  return to_device_bf16(joined);
}

}  // namespace

std::size_t DeviceWeights::bytes() const {
  std::size_t total = embed_tokens.bytes() + final_norm.bytes() + lm_head.bytes();
  for (const DeviceLayerWeights& l : layers) {
    total += l.input_norm.bytes() + l.qkv.bytes() + l.qkv_bias.bytes() + l.o_proj.bytes() +
             l.post_attention_norm.bytes() + l.gate_up.bytes() + l.down_proj.bytes();
  }
  return total;
}

std::size_t device_weight_bytes(const model::ModelConfig& c) {
  const std::size_t hidden = static_cast<std::size_t>(c.hidden_size);
  const std::size_t q = static_cast<std::size_t>(c.num_heads) * c.head_dim;
  const std::size_t kv = static_cast<std::size_t>(c.num_kv_heads) * c.head_dim;
  const std::size_t inter = static_cast<std::size_t>(c.intermediate_size);
  const std::size_t per_layer = 2 * hidden + (q + 2 * kv) * hidden +
                                (c.attention_bias ? q + 2 * kv : 0) + hidden * q +
                                2 * inter * hidden + hidden * inter;
  const std::size_t embed = static_cast<std::size_t>(c.vocab_size) * hidden;
  const std::size_t total = embed * (c.tie_word_embeddings ? 1 : 2) + hidden +
                            per_layer * static_cast<std::size_t>(c.num_layers);
  return total * sizeof(bf16);
}

DeviceWeights upload_weights(const model::ModelWeights& weights) {
  model::validate_model_weights(weights);
  DeviceWeights d;
  d.config = weights.config;
  d.config.dtype = model::ComputeDtype::bf16;
  d.embed_tokens = to_device_bf16(weights.embed_tokens);
  d.final_norm = to_device_bf16(weights.final_norm);
  if (!weights.lm_head.empty()) d.lm_head = to_device_bf16(weights.lm_head);
  d.layers.reserve(weights.layers.size());
  for (const model::LayerWeights& w : weights.layers) {
    DeviceLayerWeights l;
    l.input_norm = to_device_bf16(w.input_norm);
    l.qkv = upload_concatenated({&w.q_proj, &w.k_proj, &w.v_proj});
    if (!w.q_bias.empty()) l.qkv_bias = upload_concatenated({&w.q_bias, &w.k_bias, &w.v_bias});
    l.o_proj = to_device_bf16(w.o_proj);
    l.post_attention_norm = to_device_bf16(w.post_attention_norm);
    l.gate_up = upload_concatenated({&w.gate_proj, &w.up_proj});
    l.down_proj = to_device_bf16(w.down_proj);
    d.layers.push_back(std::move(l));
  }
  return d;
}

model::ModelWeights cast_to_bf16(const model::ModelWeights& weights) {
  model::ModelWeights w = weights;
  model::cast_weights_to_bf16(w);
  return w;
}

}  // namespace kvaudit::cuda
