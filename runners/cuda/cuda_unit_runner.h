// The unit runner on the GPU: unit::run_unit's fan-out route (runners/unit/unit_runner.h) with the
// CUDA model — one prefill of context + question with a CudaPrefillCapture at the cells'
// boundaries, then per cell a selection, a device copy of the cache truncated to the boundary and
// compacted to the kept entries (DeviceKvCache::retain), the rest fed to all cells of a batch at
// once (prefill_batch), and batched greedy decoding (decode_step, CUDA graphs).
//
// Selections: a cell whose method has a GPU scorer (capture/gpu_scorers.h; pass its spec in
// `gpu_scorers`, parallel to `cells`) is scored and top-k'd on the GPU (ties to the lower position,
// capture/gpu_top_k.h); every other method runs its CPU code on the GPU-captured data (the host
// views of CudaPrefillCapture). Scores are computed once per (method, boundary) and shared by the
// cells that differ only in the budget.
//
// Memory: the unit is planned first (memory_planner.h). If the prefill itself cannot fit, run
// throws GpuMemoryError with the plan's summary (the executor records the unit's cells as failed
// with it); otherwise cells are decoded in batches no larger than what fits.
#pragma once

#include <optional>
#include <span>
#include <stdexcept>

#include "runners/cuda/capture/gpu_scorers.h"
#include "runners/cuda/cuda_model.h"
#include "runners/unit/unit_runner.h"

namespace kvaudit::cuda {

class GpuMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `weights` are the host weights the model was built from (methods read o_proj; the CPU twin
// uses the same cast_to_bf16 values). gpu_scorers is empty or has one entry per cell.
unit::UnitResult run_unit_cuda(CudaModel& model, const model::ModelWeights& weights,
                               const unit::UnitTokens& tokens,
                               std::span<const unit::CellSpec> cells,
                               const unit::UnitRunOptions& options,
                               std::span<const std::optional<GpuScorerSpec>> gpu_scorers = {});

}  // namespace kvaudit::cuda
