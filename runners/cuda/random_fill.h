// Deterministic pseudo-random bf16 fill, for benchmark models with a real model's shapes but no
// checkpoint (8B weights are generated on the device in milliseconds instead of uploaded).
//   value(seed, i) = offset + scale · (2·u − 1),  u = top 24 bits of splitmix64(seed ⊕ i·φ) / 2^24
// rounded to bf16. The same function runs on the host (the kernel's CPU twin; tested equal).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "runners/cuda/device_weights.h"

namespace kvaudit::cuda {

#ifdef __CUDACC__
#define KVAUDIT_HOST_DEVICE __host__ __device__
#else
#define KVAUDIT_HOST_DEVICE
#endif

KVAUDIT_HOST_DEVICE inline float random_fill_value(std::uint64_t seed, std::uint64_t index,
                                                   float scale, float offset) {
  std::uint64_t z = seed ^ (index * 0x9E3779B97F4A7C15ull);
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  return offset + scale * (2.0f * u - 1.0f);
}

// out[i] = bf16(random_fill_value(seed, i, scale, offset)) for i < count.
void fill_random_bf16(__nv_bfloat16* out, std::size_t count, std::uint64_t seed, float scale,
                      float offset, cudaStream_t stream);

// Llama-3.1-8B's configuration (8.03 B parameters; hidden 4096, 32 layers, 32/8 heads, d 128,
// intermediate 14336, vocab 128256, llama3 RoPE θ 5e5 × 8), for benchmarks and memory plans.
model::ModelConfig llama31_8b_shapes();

// Weights of `config`'s shapes filled on the device: projections uniform in ±0.02·√(4096/in),
// norms 1 ± 0.05, embeddings ±0.05; biases when config.attention_bias.
DeviceWeights random_device_weights(const model::ModelConfig& config, std::uint64_t seed);

}  // namespace kvaudit::cuda
