// The memory planner's arithmetic (no GPU needed): an 8B Llama at 8K fits an H200 with room for
// many cells, at 32K with fewer, and a unit that cannot fit says what it needs against what is
// free.
#include "runners/cuda/memory_planner.h"

#include <gtest/gtest.h>

#include "runners/cuda/device_kv_cache.h"
#include "runners/cuda/device_weights.h"
#include "runners/cuda/random_fill.h"

namespace kvaudit::cuda::test {
namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;

TEST(MemoryPlanner, WeightsAndCacheBytesFollowTheShapes) {
  const model::ModelConfig c = llama31_8b_shapes();
  // 8.03 B parameters in bf16 (untied lm_head).
  const std::size_t per_layer = 2 * 4096 + std::size_t{6144} * 4096 + std::size_t{4096} * 4096 +
                                2 * std::size_t{14336} * 4096 + std::size_t{4096} * 14336;
  const std::size_t parameters = 2 * std::size_t{128256} * 4096 + 4096 + 32 * per_layer;
  EXPECT_EQ(parameters, std::size_t{8030261248});  // Llama-3.1-8B's published count
  EXPECT_EQ(device_weight_bytes(c), 2 * parameters);
  // K and V: 32 layers · 8 heads · 8192 slots · 128 · 2 B each, + 4 B positions per slot.
  const std::size_t slots = std::size_t{32} * 8 * 8192;
  EXPECT_EQ(DeviceKvCache::bytes_for(32, 8, 128, 8192),
            slots * 128 * 2 * 2 + slots * 4 + 32 * 8 * 4);
}

TEST(MemoryPlanner, LargeUnitsAreRefusedWithTheirNeedsStated) {
  const model::ModelConfig c = llama31_8b_shapes();
  UnitMemoryDemand demand;
  demand.prefill_tokens = 8192;
  demand.capacity = 8192 + 128;
  demand.concurrent_cells = 16;
  const MemoryPlan fits = plan_unit_memory(c, demand, 139 * kGiB);
  EXPECT_TRUE(fits.fits) << fits.summary;
  EXPECT_GE(fits.max_concurrent_cells, 16);
  demand.prefill_tokens = 131072;
  demand.capacity = 131072 + 128;
  demand.concurrent_cells = 64;
  const MemoryPlan too_big = plan_unit_memory(c, demand, 139 * kGiB);
  EXPECT_FALSE(too_big.fits);
  EXPECT_LT(too_big.max_concurrent_cells, 64);
  EXPECT_NE(too_big.summary.find("free"), std::string::npos) << too_big.summary;
  EXPECT_NE(too_big.summary.find("131072 rows"), std::string::npos) << too_big.summary;
  const MemoryPlan none = plan_unit_memory(c, demand, 8 * kGiB);
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(none.max_concurrent_cells, 0);
}

}  // namespace
}  // namespace kvaudit::cuda::test
