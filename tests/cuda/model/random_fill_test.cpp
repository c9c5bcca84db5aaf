// The random-fill kernel against its CPU twin (random_fill_value on the host): identical bf16 bits.
#include "runners/cuda/random_fill.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "runners/cuda/device_buffer.h"
#include "runners/model/bf16.h"
#include "tests/cuda/gpu_test_support.h"

namespace kvaudit::cuda::test {
namespace {

TEST(RandomFill, DeviceValuesEqualTheHostTwinBitForBit) {
  KVAUDIT_REQUIRE_GPU();
  const std::size_t n = 100003;
  DeviceBuffer<bf16> buffer(n);
  fill_random_bf16(buffer.data(), n, 42, 0.02f, 1.0f, nullptr);
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> device = download_as_float(buffer);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float host = model::round_to_bf16(random_fill_value(42, i, 0.02f, 1.0f));
    if (host != device[i]) ++mismatches;
  }
  std::printf("[cuda] random fill: %zu of %zu values differ from the host twin\n", mismatches, n);
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace kvaudit::cuda::test
