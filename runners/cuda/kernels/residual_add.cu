// residual_add (kernels.h), the twin of cpu::residual_add (runners/cpu/elementwise.cpp) in
// Rounding::bf16: residual[i] = [residual[i] + delta[i]] (one f32 add of two bf16 values, rounded
// to bf16 to nearest even) — bit-identical to the CPU. Grid-stride over the elements.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/kernels/device_bf16.cuh"
#include "runners/cuda/kernels/kernel_checks.h"
#include "runners/cuda/kernels/kernels.h"

namespace kvaudit::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void residual_add_kernel(__nv_bfloat16* residual, const __nv_bfloat16* delta,
                                    std::int64_t count) {
  using device_bf16::to_float;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    residual[i] = __float2bfloat16_rn(__fadd_rn(to_float(residual[i]), to_float(delta[i])));
  }
}

}  // namespace

void residual_add(__nv_bfloat16* residual, const __nv_bfloat16* delta, std::size_t count,
                  cudaStream_t stream) {
  using kernel_checks::require;
  if (count == 0) return;
  require(count <= static_cast<std::size_t>(INT64_MAX / 2), "residual_add",
          "count " + std::to_string(count) + " is too large");
  require(residual != nullptr && delta != nullptr, "residual_add",
          "residual and delta must be device pointers, got a null pointer");
  const std::int64_t elements = static_cast<std::int64_t>(count);
  residual_add_kernel<<<kernel_checks::grid_for(elements, kThreads), kThreads, 0, stream>>>(
      residual, delta, elements);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace kvaudit::cuda
