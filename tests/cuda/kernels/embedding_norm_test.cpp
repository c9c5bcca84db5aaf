// embed_tokens and rms_norm (runners/cuda/kernels) against their CPU twins cpu::embed_tokens and
// cpu::rms_norm (Rounding::bf16) at SmolLM2-135M and Llama-3.1-8B widths. Both are expected to be
// bit-identical: the embedding is a copy, and RMSNorm's fp64 sum of bf16 squares is exact in any
// order, the rest being the same rounded f32 operations (rms_norm.cu).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runners/cpu/embedding.h"
#include "runners/cpu/rms_norm.h"
#include "runners/cuda/cuda_check.h"
#include "runners/cuda/device_buffer.h"
#include "runners/cuda/kernels/kernels.h"
#include "tests/cuda/gpu_test_support.h"
#include "tests/cuda/kernels/bf16_agreement.h"
#include "tests/cuda/kernels/test_data.h"

namespace kvaudit::cuda::test {
namespace {

void check_embedding(const ModelShape& shape) {
  constexpr int kVocab = 1500;
  TestRandom random(11);
  const std::vector<float> table =
      random.bf16_values(static_cast<std::size_t>(kVocab) * shape.hidden, -1.0f, 1.0f);
  std::vector<std::int32_t> tokens = {0, kVocab - 1, 7, 7, 1234};
  for (int i = 0; i < 20; ++i) tokens.push_back(random.index(kVocab));
  const int rows = static_cast<int>(tokens.size());

  std::vector<float> expected(tokens.size() * static_cast<std::size_t>(shape.hidden));
  cpu::embed_tokens(table, kVocab, shape.hidden, tokens, expected);

  DeviceBuffer<bf16> device_table = to_device_bf16(table);
  DeviceBuffer<std::int32_t> device_tokens(tokens.size());
  device_tokens.upload(tokens);
  DeviceBuffer<bf16> device_out(expected.size());
  embed_tokens(device_table.data(), shape.hidden, device_tokens.data(), rows, device_out.data(),
               nullptr);
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());
  const Bf16Agreement agreement = compare_bf16(expected, download_as_float(device_out));
  print_agreement(std::string("embed_tokens ") + shape.name, agreement);
  EXPECT_EQ(agreement.differing, 0u) << "a row copy must be exact";
}

TEST(CudaEmbedTokens, MatchesCpuExactlySmolLM2) {
  KVAUDIT_REQUIRE_GPU();
  check_embedding(kSmolLM2);
}

TEST(CudaEmbedTokens, MatchesCpuExactlyLlama8B) {
  KVAUDIT_REQUIRE_GPU();
  check_embedding(kLlama8B);
}

// Rows of different magnitudes (2^-3 .. 2^2) so the fp64 sum and the 1/sqrt see varied exponents.
void check_rms_norm(const ModelShape& shape, float eps, bool in_place) {
  constexpr int kRows = 13;
  TestRandom random(23 + static_cast<std::uint64_t>(shape.hidden));
  std::vector<float> x;
  for (int r = 0; r < kRows; ++r) {
    const float amplitude = static_cast<float>(1 << (r % 6)) / 8.0f;
    const std::vector<float> row =
        random.bf16_values(static_cast<std::size_t>(shape.hidden), -amplitude, amplitude);
    x.insert(x.end(), row.begin(), row.end());
  }
  const std::vector<float> weight =
      random.bf16_values(static_cast<std::size_t>(shape.hidden), 0.25f, 1.75f);
  std::vector<float> expected(x.size());
  cpu::rms_norm(x, weight, shape.hidden, eps, cpu::Rounding::bf16, expected);

  DeviceBuffer<bf16> device_x = to_device_bf16(x);
  DeviceBuffer<bf16> device_weight = to_device_bf16(weight);
  DeviceBuffer<bf16> device_out(in_place ? 0 : x.size());
  bf16* out = in_place ? device_x.data() : device_out.data();
  rms_norm(device_x.data(), device_weight.data(), kRows, shape.hidden, eps, out, nullptr);
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());
  const Bf16Agreement agreement = compare_bf16(expected, download_as_float(out, x.size()));
  print_agreement(std::string("rms_norm ") + shape.name + (in_place ? " (in place)" : ""),
                  agreement);
  EXPECT_EQ(agreement.differing, 0u)
      << "the same rounded operations on exactly summed squares must agree bit for bit";
}

TEST(CudaRmsNorm, MatchesCpuExactlySmolLM2) {
  KVAUDIT_REQUIRE_GPU();
  check_rms_norm(kSmolLM2, 1e-5f, false);
}

TEST(CudaRmsNorm, MatchesCpuExactlyLlama8B) {
  KVAUDIT_REQUIRE_GPU();
  check_rms_norm(kLlama8B, 1e-5f, false);
}

TEST(CudaRmsNorm, InPlaceMatchesCpuExactly) {
  KVAUDIT_REQUIRE_GPU();
  check_rms_norm(kSmolLM2, 1e-6f, true);
}

}  // namespace
}  // namespace kvaudit::cuda::test
