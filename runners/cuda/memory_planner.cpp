// Memory planner; see memory_planner.h.
#include "runners/cuda/memory_planner.h"

#include <cstdio>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/device_kv_cache.h"
#include "runners/cuda/device_weights.h"

namespace kvaudit::cuda {
namespace {

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return text;
}

}  // namespace

MemoryPlan plan_unit_memory(const model::ModelConfig& c, const UnitMemoryDemand& demand,
                            std::size_t available_bytes) {
  MemoryPlan plan;
  const std::size_t hidden = static_cast<std::size_t>(c.hidden_size);
  const std::size_t q = static_cast<std::size_t>(c.num_heads) * c.head_dim;
  const std::size_t kv = static_cast<std::size_t>(c.num_kv_heads) * c.head_dim;
  const std::size_t inter = static_cast<std::size_t>(c.intermediate_size);
  const std::size_t rows = static_cast<std::size_t>(std::max(demand.prefill_tokens, 1));
  plan.weights = device_weight_bytes(c);
  const std::size_t one_cache = DeviceKvCache::bytes_for(c.num_layers, c.num_kv_heads, c.head_dim,
                                                         std::max(demand.capacity, 1));
  plan.activations = rows * (3 * hidden + (q + 2 * kv) + 3 * q + 3 * inter) * 2 +
                     static_cast<std::size_t>(std::max(demand.logit_rows, 1)) *
                         (hidden + static_cast<std::size_t>(c.vocab_size)) * 2;
  plan.workspaces = demand.gemm_workspace_bytes +
                    (demand.backend == AttentionBackend::eager ? demand.eager_workspace_bytes : 0);
  plan.reserve = demand.reserve_bytes;
  plan.available = available_bytes;
  const std::size_t fixed =
      plan.weights + plan.activations + plan.workspaces + plan.reserve + one_cache;
  plan.caches = one_cache * (1 + static_cast<std::size_t>(std::max(demand.concurrent_cells, 0)));
  plan.total = fixed + plan.caches - one_cache;
  plan.fits = plan.total <= available_bytes;
  plan.max_concurrent_cells = fixed > available_bytes
                                  ? 0
                                  : static_cast<int>(std::min<std::size_t>(
                                        (available_bytes - fixed) / one_cache, 1u << 30));
  plan.summary = "needs " + gib(plan.total) + " (weights " + gib(plan.weights) + ", caches " +
                 gib(plan.caches) + " for 1 + " + std::to_string(demand.concurrent_cells) +
                 " sequences of " + std::to_string(demand.capacity) + " slots, activations " +
                 gib(plan.activations) + " for " + std::to_string(rows) + " rows, workspaces " +
                 gib(plan.workspaces) + ", reserve " + gib(plan.reserve) + "); " +
                 gib(available_bytes) + " free";
  return plan;
}

std::size_t free_device_memory() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  KVAUDIT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

}  // namespace kvaudit::cuda
