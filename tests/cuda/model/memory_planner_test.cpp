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

// The capture's device copies, counted by hand for an 8B model at a 32K boundary (the K/V f32
// copies alone: 32 layers · 8 KV heads · 32768 · 128 · 4 B · 2 = 8 GiB, ≈ 8.6 GB).
TEST(MemoryPlanner, CaptureBuffersAreCountedByHand) {
  const model::ModelConfig c = llama31_8b_shapes();
  unit::CaptureOptions capture;
  capture.boundaries = {32000, 32768};
  capture.window_rows = 64;
  capture.column_sums = true;
  capture.query_moments = true;
  const std::size_t kv = std::size_t{32} * 8 * 32768 * 128 * 4 * 2;
  EXPECT_EQ(kv, 8 * kGiB);
  std::size_t per_boundary = 0;
  for (std::size_t b : {std::size_t{32000}, std::size_t{32768}}) {
    per_boundary += 32 * 64 * 128 * 4                   // window queries [H, w, d] f32
                    + 32 * b * 4                        // column sums [H, b] f32
                    + (32 * 128 + 32 * 128 * 128) * 8;  // moments [H, d] + [H, d, d] f64
  }
  const std::size_t transient = std::size_t{32} * 32768 * 2 * 4;  // row max and sum [H, B]
  EXPECT_EQ(capture_device_bytes(c, capture), kv + 32 * per_boundary + transient);
  EXPECT_EQ(capture_device_bytes(c, unit::CaptureOptions{}), 0u);

  // The plan adds it (and the pre-RoPE queries, [T, H·d] bf16, for the moments), so a unit that
  // fitted without counting the capture now needs about 8.6 GB more.
  UnitMemoryDemand demand;
  demand.prefill_tokens = 32768;
  demand.capacity = 32768 + 64;
  demand.concurrent_cells = 8;
  const MemoryPlan without = plan_unit_memory(c, demand, 139 * kGiB);
  demand.capture = capture;
  const MemoryPlan with = plan_unit_memory(c, demand, 139 * kGiB);
  const std::size_t scores = std::size_t{8} * 32 * 8 * 32768 * 4;  // one [layers, Hkv, B] per cell
  const std::size_t pre_rope = std::size_t{32768} * 4096 * 2;
  EXPECT_EQ(with.capture, kv + 32 * per_boundary + transient + scores);
  EXPECT_EQ(with.total - without.total, with.capture + pre_rope);
  EXPECT_NE(with.summary.find("capture 8."), std::string::npos) << with.summary;
  EXPECT_LE(with.max_concurrent_cells, without.max_concurrent_cells);
}

// Each captured decode step owns a workspace for its batch (CudaModel::DecodeGraph), up to
// kMaxDecodeGraphs of them: at n concurrent cells, min(n, 64) graphs of n rows each.
TEST(MemoryPlanner, DecodeGraphWorkspacesAreCounted) {
  const model::ModelConfig c = llama31_8b_shapes();
  const std::size_t row =
      (3 * 4096 + 6144 + 3 * 4096 + 3 * 14336) * 2 + (4096 + 128256) * 2 + 6 * 4 + 64;
  EXPECT_EQ(decode_graph_bytes(c, 1), row);
  EXPECT_EQ(decode_graph_bytes(c, 48), 48 * row);
  UnitMemoryDemand demand;
  demand.prefill_tokens = 4096;
  demand.capacity = 4096 + 128;
  demand.concurrent_cells = 100;
  const MemoryPlan plan = plan_unit_memory(c, demand, 139 * kGiB);
  EXPECT_EQ(plan.decode_graphs, std::size_t{64} * 100 * row);
  // max_concurrent_cells is the largest n whose own plan fits.
  const int n = plan.max_concurrent_cells;
  ASSERT_GT(n, 0);
  demand.concurrent_cells = n;
  EXPECT_TRUE(plan_unit_memory(c, demand, 139 * kGiB).fits);
  demand.concurrent_cells = n + 1;
  EXPECT_FALSE(plan_unit_memory(c, demand, 139 * kGiB).fits);
}

}  // namespace
}  // namespace kvaudit::cuda::test
