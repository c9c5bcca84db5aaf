// make_cuda_engine: the CUDA backend's inference engine (cuda::CudaModel, runners/cuda) for the
// executor, without the executor depending on CUDA itself: a build with nvcc links
// cuda_engine_cuda.cpp, a build without it cuda_engine_none.cpp. The executor picks the device;
// the fan-out it then runs (unit::run_unit) is the same on both.
//
// The CUDA backend computes in bf16 only; a model whose manifest dtype is f32 runs on the CPU
// backend even when a GPU is used (UnitExecutor decides; the run's log says so).
#pragma once

#include <memory>

#include "base/attention_backend.h"
#include "runners/model/model_weights.h"
#include "runners/unit/inference_engine.h"

namespace kvaudit::run {

// Whether this kvaudit was built with the CUDA backend.
bool cuda_engine_built();

// A CudaModel of `weights` (bf16; they must outlive the engine) with `backend` on the calling
// thread's current CUDA device. Throws std::invalid_argument for f32 weights and
// std::logic_error in a build without CUDA.
std::unique_ptr<unit::InferenceEngine> make_cuda_engine(const model::ModelWeights& weights,
                                                        AttentionBackend backend);

}  // namespace kvaudit::run
