// Memory planner; see memory_planner.h.
#include "runners/cuda/memory_planner.h"

#include <algorithm>
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

std::size_t as_size(int value) { return static_cast<std::size_t>(std::max(value, 0)); }

// The forward's working buffers for `rows` rows (CudaModel::Workspace::allocate) and its logits.
std::size_t forward_bytes(const model::ModelConfig& c, std::size_t rows, std::size_t logit_rows) {
  const std::size_t hidden = as_size(c.hidden_size);
  const std::size_t q = as_size(c.num_heads) * as_size(c.head_dim);
  const std::size_t kv = as_size(c.num_kv_heads) * as_size(c.head_dim);
  const std::size_t inter = as_size(c.intermediate_size);
  return rows * (3 * hidden + (q + 2 * kv) + 3 * q + 3 * inter) * 2 +
         logit_rows * (hidden + as_size(c.vocab_size)) * 2;
}

int max_boundary(const unit::CaptureOptions& capture) {
  int b = 0;
  for (int boundary : capture.boundaries) b = std::max(b, boundary);
  return b;
}

}  // namespace

std::size_t capture_device_bytes(const model::ModelConfig& c, const unit::CaptureOptions& capture) {
  if (capture.boundaries.empty()) return 0;
  const std::size_t heads = as_size(c.num_heads);
  const std::size_t kv_heads = as_size(c.num_kv_heads);
  const std::size_t d = as_size(c.head_dim);
  const std::size_t kv_rows = as_size(max_boundary(capture));
  std::size_t per_layer = 2 * kv_heads * kv_rows * d * sizeof(float);
  std::vector<int> boundaries = capture.boundaries;
  std::sort(boundaries.begin(), boundaries.end());
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end()), boundaries.end());
  for (int b : boundaries) {
    const std::size_t w = as_size(std::min(capture.window_rows, b));
    per_layer += heads * w * d * sizeof(float);
    if (capture.column_sums) per_layer += heads * as_size(b) * sizeof(float);
    if (capture.query_moments) per_layer += (heads * d + heads * d * d) * sizeof(double);
  }
  const std::size_t transient = capture.column_sums ? heads * kv_rows * 2 * sizeof(float) : 0;
  return as_size(c.num_layers) * per_layer + transient;
}

std::size_t decode_graph_bytes(const model::ModelConfig& c, int rows) {
  const std::size_t n = as_size(rows);
  // Activations and logits at n rows, plus tokens, positions, row_sequence, row_offset,
  // new_tokens, logit_row_index (int32) and the descriptors.
  return forward_bytes(c, n, n) + n * 6 * sizeof(std::int32_t) + n * 64;
}

MemoryPlan plan_unit_memory(const model::ModelConfig& c, const UnitMemoryDemand& demand,
                            std::size_t available_bytes) {
  MemoryPlan plan;
  const std::size_t rows = as_size(std::max(demand.prefill_tokens, 1));
  const int cells = std::max(demand.concurrent_cells, 0);
  plan.weights = device_weight_bytes(c);
  const std::size_t one_cache = DeviceKvCache::bytes_for(c.num_layers, c.num_kv_heads, c.head_dim,
                                                         std::max(demand.capacity, 1));
  plan.activations = forward_bytes(c, rows, as_size(std::max(demand.logit_rows, 1)));
  if (demand.capture.query_moments) {
    plan.activations += rows * as_size(c.num_heads) * as_size(c.head_dim) * 2;
  }
  const std::size_t capture_fixed = capture_device_bytes(c, demand.capture);
  // GPU scores: [layers, Hkv, b] f32 per (method, boundary), at most one per cell.
  const std::size_t scores_per_cell =
      demand.capture.boundaries.empty() ? 0
                                        : as_size(c.num_layers) * as_size(c.num_kv_heads) *
                                              as_size(max_boundary(demand.capture)) * sizeof(float);
  plan.workspaces = demand.gemm_workspace_bytes +
                    (demand.backend == AttentionBackend::eager ? demand.eager_workspace_bytes : 0);
  plan.reserve = demand.reserve_bytes;
  plan.available = available_bytes;
  const std::size_t fixed =
      plan.weights + plan.activations + capture_fixed + plan.workspaces + plan.reserve + one_cache;
  // What n concurrent cells add: their caches, their GPU scores, the decode graphs' workspaces.
  const auto per_cells = [&](int n) {
    const std::size_t graphs = as_size(std::min(n, kMaxDecodeGraphs));
    return as_size(n) * (one_cache + scores_per_cell) + graphs * decode_graph_bytes(c, n);
  };
  plan.caches = one_cache * (1 + as_size(cells));
  plan.capture = capture_fixed + as_size(cells) * scores_per_cell;
  plan.decode_graphs = as_size(std::min(cells, kMaxDecodeGraphs)) * decode_graph_bytes(c, cells);
  plan.total = fixed + per_cells(cells);
  plan.fits = plan.total <= available_bytes;
  if (fixed > available_bytes) {
    plan.max_concurrent_cells = 0;
  } else {
    // per_cells grows with n: the largest n with fixed + per_cells(n) ≤ available, by bisection.
    const std::size_t room = available_bytes - fixed;
    int low = 0;
    int high = static_cast<int>(std::min<std::size_t>(
        room / std::max<std::size_t>(one_cache, 1) + 1, std::size_t{1} << 30));
    while (low < high) {
      const int mid = low + (high - low + 1) / 2;
      if (per_cells(mid) <= room) {
        low = mid;
      } else {
        high = mid - 1;
      }
    }
    plan.max_concurrent_cells = low;
  }
  plan.summary = "needs " + gib(plan.total) + " (weights " + gib(plan.weights) + ", caches " +
                 gib(plan.caches) + " for 1 + " + std::to_string(demand.concurrent_cells) +
                 " sequences of " + std::to_string(demand.capacity) + " slots, activations " +
                 gib(plan.activations) + " for " + std::to_string(rows) + " rows, capture " +
                 gib(plan.capture) + ", decode graphs " + gib(plan.decode_graphs) +
                 ", workspaces " + gib(plan.workspaces) + ", reserve " + gib(plan.reserve) + "); " +
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
