// Memory planner: whether a unit fits on the GPU before anything is allocated, so a unit too large
// for the device becomes records with a clear message instead of an out-of-memory crash.
//
// Bytes counted (bf16 = 2 B):
//   weights      device_weight_bytes(config)
//   caches       (1 + concurrent cells) · DeviceKvCache::bytes_for(layers, Hkv, d, capacity)
//   activations  rows · (3·hidden + (H + 2·Hkv)·d + 3·H·d + 3·inter) · 2  (the forward's buffers)
//                + logit rows · (hidden + vocab) · 2
//   workspaces   cuBLASLt workspace + the eager backend's score workspace (eager only)
//   reserve      a fixed margin for the CUDA context, cuBLAS and graph memory (default 1 GiB)
#pragma once

#include <cstddef>
#include <string>

#include "base/attention_backend.h"
#include "runners/model/model_config.h"

namespace kvaudit::cuda {

struct UnitMemoryDemand {
  int prefill_tokens = 0;    // T of the unit's one prefill
  int capacity = 0;          // cache slots per head (prefill + generated tokens)
  int concurrent_cells = 0;  // cells whose caches live at once (the fan-out's decode batch)
  int logit_rows = 1;
  AttentionBackend backend = AttentionBackend::sdpa;
  std::size_t gemm_workspace_bytes = std::size_t{64} << 20;
  std::size_t eager_workspace_bytes = std::size_t{512} << 20;
  std::size_t reserve_bytes = std::size_t{1} << 30;
};

struct MemoryPlan {
  std::size_t weights = 0;
  std::size_t caches = 0;
  std::size_t activations = 0;
  std::size_t workspaces = 0;
  std::size_t reserve = 0;
  std::size_t total = 0;
  std::size_t available = 0;
  bool fits = false;
  // The largest number of concurrent cells that fits (0 if not even the prefill fits).
  int max_concurrent_cells = 0;
  // One line: what is needed against what is free (for records and logs).
  std::string summary;
};

MemoryPlan plan_unit_memory(const model::ModelConfig& config, const UnitMemoryDemand& demand,
                            std::size_t available_bytes);

// Free bytes on the current device (cudaMemGetInfo).
std::size_t free_device_memory();

}  // namespace kvaudit::cuda
