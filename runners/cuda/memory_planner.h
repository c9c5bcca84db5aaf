// Memory planner: whether a unit fits on the GPU before anything is allocated, so a unit too large
// for the device becomes records with a clear message instead of an out-of-memory crash.
//
// Bytes counted (bf16 = 2 B; T = prefill rows, n = concurrent cells, c = cache capacity):
//   weights        device_weight_bytes(config)
//   caches         (1 + n) · DeviceKvCache::bytes_for(layers, Hkv, d, c)
//   activations    T · (3·hidden + (H + 2·Hkv)·d + 3·H·d + 3·inter) · 2   (the forward's buffers)
//                  + T · H·d · 2 when the capture keeps pre-RoPE queries (query moments)
//                  + logit rows · (hidden + vocab) · 2
//   capture        with a capture (CudaPrefillCapture, B = max boundary, w_b = min(W, b)), per
//   layer:
//                    K and V f32 copies      2 · Hkv · B · d · 4
//                    per boundary b          H · w_b · d · 4 + [column sums] H · b · 4
//                                            + [query moments] (H·d + H·d²) · 8
//                  + transient row statistics H · B · 2 · 4 (column sums)
//                  + GPU scores, one buffer per cell at most: n · layers · Hkv · B · 4
//   decode graphs  min(kMaxDecodeGraphs, n) captured steps, each with its own workspace of at most
//                  n rows (the activations and logits above at n rows, plus its row bookkeeping)
//   workspaces     cuBLASLt workspace + the eager backend's score workspace (eager only)
//   reserve        a fixed margin for the CUDA context, cuBLAS and graph memory (default 1 GiB)
// The capture's host copies live in host memory and are not counted here.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/attention_backend.h"
#include "runners/model/model_config.h"
#include "runners/unit/prefill_capture.h"

namespace kvaudit::cuda {

// The decode-graph cache's bound (CudaModel keeps at most this many captured compositions).
inline constexpr int kMaxDecodeGraphs = 64;

struct UnitMemoryDemand {
  int prefill_tokens = 0;    // T of the unit's one prefill
  int capacity = 0;          // cache slots per head (prefill + generated tokens)
  int concurrent_cells = 0;  // cells whose caches live at once (the fan-out's decode batch)
  int logit_rows = 1;
  AttentionBackend backend = AttentionBackend::sdpa;
  unit::CaptureOptions capture;  // the prefill's capture (boundaries empty: none)
  std::size_t gemm_workspace_bytes = std::size_t{64} << 20;
  std::size_t eager_workspace_bytes = std::size_t{512} << 20;
  std::size_t reserve_bytes = std::size_t{1} << 30;
};

struct MemoryPlan {
  std::size_t weights = 0;
  std::size_t caches = 0;
  std::size_t activations = 0;
  std::size_t capture = 0;
  std::size_t decode_graphs = 0;
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

// Bytes of a CudaPrefillCapture with these options for `config`, on the device.
std::size_t capture_device_bytes(const model::ModelConfig& config,
                                 const unit::CaptureOptions& capture);
// Bytes of one captured decode step's own workspace for a batch of `rows` sequences.
std::size_t decode_graph_bytes(const model::ModelConfig& config, int rows);

MemoryPlan plan_unit_memory(const model::ModelConfig& config, const UnitMemoryDemand& demand,
                            std::size_t available_bytes);

// Free bytes on the current device (cudaMemGetInfo).
std::size_t free_device_memory();

}  // namespace kvaudit::cuda
