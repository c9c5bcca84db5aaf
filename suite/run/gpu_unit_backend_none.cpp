// make_gpu_unit_backend for a build without nvcc: there is no CUDA backend.
#include "suite/run/gpu_unit_backend.h"

namespace kvaudit::run {

std::unique_ptr<GpuUnitBackend> make_gpu_unit_backend() { return nullptr; }

}  // namespace kvaudit::run
