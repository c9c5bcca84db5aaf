// compact_kv_cache (runners/cuda/kernels/retain_kernels.h) against cpu::KvCache::retain: an already
// ragged two-layer cache is uploaded, every (layer, head) gets its own keep list (all, none, a
// random subset, only the newest), the device compacts all heads at once and must then hold exactly
// the positions, keys, values and lengths of the CPU cache after the same retains.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "runners/cpu/kv_cache.h"
#include "runners/cuda/cuda_check.h"
#include "runners/cuda/device_buffer.h"
#include "runners/cuda/kernels/retain_kernels.h"
#include "tests/cuda/gpu_test_support.h"
#include "tests/cuda/kernels/bf16_agreement.h"
#include "tests/cuda/kernels/kv_cache_test_helpers.h"
#include "tests/cuda/kernels/test_data.h"

namespace kvaudit::cuda::test {
namespace {

constexpr int kLayers = 2;

void check_compaction(const ModelShape& shape, int history, std::uint64_t seed) {
  const int Hkv = shape.kv_heads;
  const std::size_t dim = static_cast<std::size_t>(shape.head_dim);
  TestRandom random(seed);
  cpu::KvCache cache = make_history_cache(kLayers, Hkv, shape.head_dim, history, 2.0f, random);
  retain_random_subsets(cache, 0.9, random);  // start ragged
  DeviceKvCopy device_cache = upload_kv_cache(cache, history + 4);

  std::vector<std::int32_t> offsets = {0};
  std::vector<std::int32_t> slots;
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int h = 0; h < Hkv; ++h) {
      const int lh = layer * Hkv + h;
      const cpu::KvHeadView view = cache.head(layer, h);
      std::vector<std::int32_t> keep_positions;
      for (std::size_t i = 0; i < view.size(); ++i) {
        bool keep = false;
        switch (lh % 4) {
          case 0:
            keep = true;
            break;  // keeps everything
          case 1:
            keep = false;
            break;  // keeps nothing
          case 2:
            keep = random.uniform() < 0.4;
            break;  // a random subset
          default:
            keep = i + 1 == view.size();
            break;  // only the newest entry
        }
        if (keep) {
          keep_positions.push_back(view.positions[i]);
          slots.push_back(static_cast<std::int32_t>(i));
        }
      }
      offsets.push_back(static_cast<std::int32_t>(slots.size()));
      cache.retain(layer, h, keep_positions);
    }
  }
  const std::int64_t total_kept = static_cast<std::int64_t>(slots.size());
  DeviceBuffer<std::int32_t> device_offsets(offsets.size()), device_slots(slots.size());
  device_offsets.upload(offsets);
  device_slots.upload(slots);
  const std::size_t scratch_rows = slots.empty() ? 1 : slots.size();
  DeviceBuffer<bf16> scratch_keys(scratch_rows * dim), scratch_values(scratch_rows * dim);
  DeviceBuffer<std::int32_t> scratch_positions(scratch_rows);
  compact_kv_cache(device_cache.descriptor, kLayers, device_offsets.data(), device_slots.data(),
                   total_kept, scratch_keys.data(), scratch_values.data(), scratch_positions.data(),
                   nullptr);
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());

  std::size_t differing = 0;
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int h = 0; h < Hkv; ++h) {
      const std::string where = std::string(shape.name) + " layer " + std::to_string(layer) +
                                ", head " + std::to_string(h);
      const HeadContents expected = cpu_head(cache, layer, h);
      const HeadContents actual = download_head(device_cache, layer, h);
      ASSERT_EQ(actual.positions, expected.positions) << where;
      const Bf16Agreement keys = compare_bf16(expected.keys, actual.keys);
      const Bf16Agreement values = compare_bf16(expected.values, actual.values);
      EXPECT_EQ(keys.differing, 0u) << where << ": keys";
      EXPECT_EQ(values.differing, 0u) << where << ": values";
      differing += keys.differing + values.differing;
    }
  }
  std::printf("[agreement] compact_kv_cache %s: %lld kept entries, %zu differing values\n",
              shape.name, static_cast<long long>(total_kept), differing);
  std::fflush(stdout);
}

TEST(CudaCompactKvCache, MatchesCpuRetainSmolLM2) {
  KVAUDIT_REQUIRE_GPU();
  check_compaction(kSmolLM2, 500, 401);
}

TEST(CudaCompactKvCache, MatchesCpuRetainLlama8B) {
  KVAUDIT_REQUIRE_GPU();
  check_compaction(kLlama8B, 300, 402);
}

}  // namespace
}  // namespace kvaudit::cuda::test
