// make_cuda_engine for a build without nvcc: there is no CUDA backend.
#include <stdexcept>

#include "suite/run/cuda_engine.h"

namespace kvaudit::run {

bool cuda_engine_built() { return false; }

std::unique_ptr<unit::InferenceEngine> make_cuda_engine(const model::ModelWeights&,
                                                        AttentionBackend) {
  throw std::logic_error(
      "this kvaudit was built without the CUDA backend (nvcc not found, or "
      "-DKVAUDIT_ENABLE_CUDA=OFF)");
}

}  // namespace kvaudit::run
