// GpuUnitBackend: how the executor runs a unit on the CUDA backend (runners/cuda) without depending
// on CUDA itself: a build with nvcc links gpu_unit_backend_cuda.cpp (CudaModel per model and
// attention backend, cuda::run_unit_cuda with the GPU scorers of the methods that have one), a
// build without it gpu_unit_backend_none.cpp (make_gpu_unit_backend returns null).
//
// The CUDA backend computes in bf16 only; a model whose manifest dtype is f32 runs on the CPU
// backend even when a GPU is used (UnitExecutor decides; the run's log says so).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "methods/method_factory.h"
#include "runners/unit/unit_runner.h"
#include "suite/run/loaded_model.h"

namespace kvaudit::run {

class GpuUnitBackend {
 public:
  virtual ~GpuUnitBackend() = default;
  // Runs the fan-out route of one unit on the current CUDA device. `method_configs[k]` is the
  // configuration of cells[k]'s method (nullptr for full-KV cells). Throws like unit::run_unit,
  // and a std::runtime_error whose message begins "GPU memory:" when the unit cannot fit.
  virtual unit::UnitResult run(LoadedModel& model, std::string_view attention_backend,
                               const unit::UnitTokens& tokens,
                               std::span<const unit::CellSpec> cells,
                               std::span<const methods::MethodConfig* const> method_configs,
                               const unit::UnitRunOptions& options) = 0;
};

// Null when this kvaudit was built without CUDA.
std::unique_ptr<GpuUnitBackend> make_gpu_unit_backend();

}  // namespace kvaudit::run
