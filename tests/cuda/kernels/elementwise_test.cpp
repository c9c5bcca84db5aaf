// silu_mul, residual_add, gather_rows and advance_lengths (runners/cuda/kernels) against the CPU:
// silu_mul vs cpu::silu_mul and residual_add vs cpu::residual_add (Rounding::bf16) at SmolLM2-135M
// and Llama-3.1-8B widths; gather_rows vs a host row copy; advance_lengths vs the expected lengths.
#include "runners/cpu/elementwise.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/device_buffer.h"
#include "runners/cuda/kernels/kernels.h"
#include "tests/cuda/gpu_test_support.h"
#include "tests/cuda/kernels/bf16_agreement.h"
#include "tests/cuda/kernels/kv_cache_test_helpers.h"
#include "tests/cuda/kernels/test_data.h"

namespace kvaudit::cuda::test {
namespace {

// silu's exp is fp64-evaluated and rounded once on the GPU, glibc's expf on the CPU (< 0.502 ulp):
// they can differ by one f32 ulp in the rarest cases, which moves a bf16 result by at most one ulp
// when it sits on a rounding boundary. Allowed: ≤ 1 bf16 ulp on at most 1 value in 10^4.
void check_silu_mul(const ModelShape& shape, int rows) {
  const std::size_t inter = static_cast<std::size_t>(shape.inter);
  TestRandom random(31 + inter);
  std::vector<float> gate_up =
      random.bf16_values(static_cast<std::size_t>(rows) * 2 * inter, -3.0f, 3.0f);
  // The gate halves span the whole activation range, including saturation and exp overflow.
  for (int r = 0; r < rows; ++r) {
    for (std::size_t i = 0; i < inter; ++i) {
      gate_up[static_cast<std::size_t>(r) * 2 * inter + i] = random.bf16(-100.0f, 30.0f);
    }
  }
  std::vector<float> gate, up;
  for (int r = 0; r < rows; ++r) {
    const auto row = gate_up.begin() + static_cast<std::ptrdiff_t>(r * 2 * inter);
    gate.insert(gate.end(), row, row + static_cast<std::ptrdiff_t>(inter));
    up.insert(up.end(), row + static_cast<std::ptrdiff_t>(inter),
              row + static_cast<std::ptrdiff_t>(2 * inter));
  }
  std::vector<float> expected(gate.size());
  cpu::silu_mul(gate, up, cpu::Rounding::bf16, expected);

  DeviceBuffer<bf16> device_gate_up = to_device_bf16(gate_up);
  DeviceBuffer<bf16> device_out(expected.size());
  silu_mul(device_gate_up.data(), rows, shape.inter, device_out.data(), nullptr);
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());
  const Bf16Agreement agreement = compare_bf16(expected, download_as_float(device_out));
  print_agreement(std::string("silu_mul ") + shape.name, agreement);
  EXPECT_LE(agreement.max_ulps, 1);
  EXPECT_LE(agreement.differing * 10000, agreement.count);
}

TEST(CudaSiluMul, MatchesCpuSmolLM2) {
  KVAUDIT_REQUIRE_GPU();
  check_silu_mul(kSmolLM2, 33);
}

TEST(CudaSiluMul, MatchesCpuLlama8B) {
  KVAUDIT_REQUIRE_GPU();
  check_silu_mul(kLlama8B, 5);
}

void check_residual_add(const ModelShape& shape, int rows) {
  const std::size_t count = static_cast<std::size_t>(rows) * shape.hidden;
  TestRandom random(41 + count);
  std::vector<float> residual = random.bf16_values(count, -8.0f, 8.0f);
  const std::vector<float> delta = random.bf16_values(count, -0.5f, 0.5f);
  DeviceBuffer<bf16> device_residual = to_device_bf16(residual);
  DeviceBuffer<bf16> device_delta = to_device_bf16(delta);
  cpu::residual_add(residual, delta, cpu::Rounding::bf16);
  residual_add(device_residual.data(), device_delta.data(), count, nullptr);
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());
  const Bf16Agreement agreement = compare_bf16(residual, download_as_float(device_residual));
  print_agreement(std::string("residual_add ") + shape.name, agreement);
  EXPECT_EQ(agreement.differing, 0u) << "one rounded f32 add must agree bit for bit";
}

TEST(CudaResidualAdd, MatchesCpuExactlySmolLM2) {
  KVAUDIT_REQUIRE_GPU();
  check_residual_add(kSmolLM2, 17);
}

TEST(CudaResidualAdd, MatchesCpuExactlyLlama8B) {
  KVAUDIT_REQUIRE_GPU();
  check_residual_add(kLlama8B, 3);
}

TEST(CudaGatherRows, CopiesTheListedRows) {
  KVAUDIT_REQUIRE_GPU();
  constexpr int kRows = 40;
  const int width = kSmolLM2.hidden;
  TestRandom random(51);
  const std::vector<float> x = random.bf16_values(static_cast<std::size_t>(kRows) * width, -1, 1);
  const std::vector<std::int32_t> rows = {39, 0, 17, 17, 5};
  std::vector<float> expected;
  for (const std::int32_t r : rows) {
    const auto row = x.begin() + static_cast<std::ptrdiff_t>(r) * width;
    expected.insert(expected.end(), row, row + width);
  }
  DeviceBuffer<bf16> device_x = to_device_bf16(x);
  DeviceBuffer<std::int32_t> device_rows(rows.size());
  device_rows.upload(rows);
  DeviceBuffer<bf16> device_out(expected.size());
  gather_rows(device_x.data(), device_rows.data(), static_cast<int>(rows.size()), width,
              device_out.data(), nullptr);
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());
  const Bf16Agreement agreement = compare_bf16(expected, download_as_float(device_out));
  print_agreement("gather_rows", agreement);
  EXPECT_EQ(agreement.differing, 0u);
}

// Three sequences of different histories: only `layer` advances, by each sequence's own count.
TEST(CudaAdvanceLengths, AdvancesEveryHeadOfTheLayerBySequence) {
  KVAUDIT_REQUIRE_GPU();
  constexpr int kLayers = 3;
  constexpr int kLayer = 1;
  TestRandom random(61);
  const std::vector<int> histories = {1, 20, 7};
  const std::vector<std::int32_t> new_tokens = {1, 5, 0};
  std::vector<DeviceKvCopy> caches;
  std::vector<DeviceSequenceKv> descriptors;
  std::vector<std::vector<std::int32_t>> before;
  for (const int history : histories) {
    cpu::KvCache cache =
        make_history_cache(kLayers, kSmolLM2.kv_heads, kSmolLM2.head_dim, history, 1.0f, random);
    retain_random_subsets(cache, 0.7, random);
    caches.push_back(upload_kv_cache(cache, 32));
    descriptors.push_back(caches.back().descriptor);
    before.push_back(download_lengths(caches.back(), kLayers));
  }
  DeviceBuffer<DeviceSequenceKv> device_sequences(descriptors.size());
  device_sequences.upload(descriptors);
  DeviceBuffer<std::int32_t> device_new_tokens(new_tokens.size());
  device_new_tokens.upload(new_tokens);
  advance_lengths(device_sequences.data(), static_cast<int>(descriptors.size()), kLayer,
                  device_new_tokens.data(), nullptr);
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());
  for (std::size_t s = 0; s < caches.size(); ++s) {
    const std::vector<std::int32_t> after = download_lengths(caches[s], kLayers);
    for (int layer = 0; layer < kLayers; ++layer) {
      for (int h = 0; h < kSmolLM2.kv_heads; ++h) {
        const std::size_t lh = static_cast<std::size_t>(layer * kSmolLM2.kv_heads + h);
        const std::int32_t added = layer == kLayer ? new_tokens[s] : 0;
        EXPECT_EQ(after[lh], before[s][lh] + added)
            << "sequence " << s << ", layer " << layer << ", head " << h;
      }
    }
  }
}

}  // namespace
}  // namespace kvaudit::cuda::test
