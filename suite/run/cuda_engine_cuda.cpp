// make_cuda_engine with CUDA: a cuda::CudaModel uploaded to the current device.
#include <stdexcept>

#include "runners/cuda/cuda_model.h"
#include "suite/run/cuda_engine.h"

namespace kvaudit::run {

bool cuda_engine_built() { return true; }

std::unique_ptr<unit::InferenceEngine> make_cuda_engine(const model::ModelWeights& weights,
                                                        AttentionBackend backend) {
  if (weights.config.dtype != model::ComputeDtype::bf16) {
    throw std::invalid_argument("the CUDA backend computes in bf16; this model's dtype is f32");
  }
  return std::make_unique<cuda::CudaModel>(weights, backend);
}

}  // namespace kvaudit::run
