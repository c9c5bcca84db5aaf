// Device random fill and random benchmark weights; see random_fill.h.
#include <cmath>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/random_fill.h"

namespace kvaudit::cuda {
namespace {

__global__ void fill_random_kernel(__nv_bfloat16* out, std::size_t count, std::uint64_t seed,
                                   float scale, float offset) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    out[i] = __float2bfloat16_rn(random_fill_value(seed, i, scale, offset));
  }
}

DeviceBuffer<bf16> random_buffer(std::size_t count, std::uint64_t seed, float scale, float offset) {
  DeviceBuffer<bf16> buffer(count);
  fill_random_bf16(buffer.data(), count, seed, scale, offset, nullptr);
  return buffer;
}

float projection_scale(int in_features) {
  return 0.02f * std::sqrt(4096.0f / static_cast<float>(in_features));
}

}  // namespace

void fill_random_bf16(__nv_bfloat16* out, std::size_t count, std::uint64_t seed, float scale,
                      float offset, cudaStream_t stream) {
  if (count == 0) return;
  const int threads = 256;
  const std::size_t wanted = (count + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
  fill_random_kernel<<<blocks, threads, 0, stream>>>(out, count, seed, scale, offset);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

model::ModelConfig llama31_8b_shapes() {
  model::ModelConfig c;
  c.architecture = model::Architecture::llama;
  c.architecture_name = "LlamaForCausalLM (Llama-3.1-8B shapes)";
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.vocab_size = 128256;
  c.rms_norm_eps = 1e-5;
  c.rope.theta = 500000.0;
  c.rope.scaling = model::RopeScalingType::llama3;
  c.rope.factor = 8.0;
  c.rope.low_freq_factor = 1.0;
  c.rope.high_freq_factor = 4.0;
  c.rope.original_max_position_embeddings = 8192;
  c.max_position_embeddings = 131072;
  c.dtype = model::ComputeDtype::bf16;
  return c;
}

DeviceWeights random_device_weights(const model::ModelConfig& c, std::uint64_t seed) {
  DeviceWeights w;
  w.config = c;
  w.config.dtype = model::ComputeDtype::bf16;
  const std::size_t hidden = static_cast<std::size_t>(c.hidden_size);
  const std::size_t q = static_cast<std::size_t>(c.num_heads) * c.head_dim;
  const std::size_t kv = static_cast<std::size_t>(c.num_kv_heads) * c.head_dim;
  const std::size_t inter = static_cast<std::size_t>(c.intermediate_size);
  std::uint64_t stream_id = seed * 1000003ull;
  auto next = [&]() { return ++stream_id; };
  w.embed_tokens =
      random_buffer(static_cast<std::size_t>(c.vocab_size) * hidden, next(), 0.05f, 0.0f);
  w.final_norm = random_buffer(hidden, next(), 0.05f, 1.0f);
  if (!c.tie_word_embeddings) {
    w.lm_head = random_buffer(static_cast<std::size_t>(c.vocab_size) * hidden, next(),
                              projection_scale(c.hidden_size), 0.0f);
  }
  for (int layer = 0; layer < c.num_layers; ++layer) {
    DeviceLayerWeights l;
    l.input_norm = random_buffer(hidden, next(), 0.05f, 1.0f);
    l.qkv = random_buffer((q + 2 * kv) * hidden, next(), projection_scale(c.hidden_size), 0.0f);
    if (c.attention_bias) l.qkv_bias = random_buffer(q + 2 * kv, next(), 0.02f, 0.0f);
    l.o_proj = random_buffer(hidden * q, next(), projection_scale(static_cast<int>(q)), 0.0f);
    l.post_attention_norm = random_buffer(hidden, next(), 0.05f, 1.0f);
    l.gate_up = random_buffer(2 * inter * hidden, next(), projection_scale(c.hidden_size), 0.0f);
    l.down_proj =
        random_buffer(hidden * inter, next(), projection_scale(c.intermediate_size), 0.0f);
    w.layers.push_back(std::move(l));
  }
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());
  return w;
}

}  // namespace kvaudit::cuda
