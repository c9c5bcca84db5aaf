// Deterministic test inputs for the CUDA kernel tests: a splitmix64 stream (Steele, Lea & Flood,
// "Fast splittable pseudorandom number generators", OOPSLA 2014) drawing bf16-representable floats,
// and the model shapes the tests run at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runners/model/bf16.h"

namespace kvaudit::cuda::test {

class TestRandom {
 public:
  explicit TestRandom(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [low, high), rounded to the nearest bf16 value.
  float bf16(float low, float high) {
    const double u = uniform();
    return model::round_to_bf16(static_cast<float>(low + (high - low) * u));
  }
  std::vector<float> bf16_values(std::size_t count, float low, float high) {
    std::vector<float> values(count);
    for (float& v : values) v = bf16(low, high);
    return values;
  }
  // Uniform in [0, n).
  std::int32_t index(std::int32_t n) {
    return static_cast<std::int32_t>(uniform() * static_cast<double>(n));
  }

 private:
  std::uint64_t state_;
};

struct ModelShape {
  const char* name;
  int heads;
  int kv_heads;
  int head_dim;
  int hidden;
  int inter;
};

inline constexpr ModelShape kSmolLM2{"SmolLM2-135M", 9, 3, 64, 576, 1536};
inline constexpr ModelShape kLlama8B{"Llama-3.1-8B", 32, 8, 128, 4096, 14336};

}  // namespace kvaudit::cuda::test
