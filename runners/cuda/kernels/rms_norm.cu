// rms_norm (kernels.h), the twin of cpu::rms_norm (runners/cpu/rms_norm.cpp) in Rounding::bf16:
//   var = fp32( Σ_i x_i² / hidden )      (accumulated in fp64, rounded once to f32)
//   r   = 1 / sqrt(var + eps)            (IEEE f32 add, sqrt and division: __fadd_rn, __fsqrt_rn,
//                                         __fdiv_rn, as the CPU's 1.0f / std::sqrt(...))
//   out = [w · [x · r]]                  ([] = bf16 round-to-nearest-even)
// Squares of bf16 values are exact in fp64 and their sum is exact for any realistic spread of
// magnitudes, so the fp64 summation order (a block tree here, sequential on the CPU) does not
// change var: the output matches the CPU bit for bit. One block per row; out may alias x (each
// element is read and written by the same thread, after the reduction has read every element).
#include <cstdint>
#include <string>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/kernels/device_bf16.cuh"
#include "runners/cuda/kernels/kernel_checks.h"
#include "runners/cuda/kernels/kernels.h"

namespace kvaudit::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__global__ void rms_norm_kernel(const __nv_bfloat16* x, const __nv_bfloat16* weight, int hidden,
                                float eps, __nv_bfloat16* out) {
  using device_bf16::round_bf16;
  using device_bf16::to_float;
  __shared__ double warp_sums[kWarps];
  __shared__ float inverse_rms_shared;

  const std::int64_t row_start = static_cast<std::int64_t>(blockIdx.x) * hidden;
  const __nv_bfloat16* x_row = x + row_start;
  __nv_bfloat16* out_row = out + row_start;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;

  double sum_squares = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < hidden; i += kThreads) {
    const double value = static_cast<double>(to_float(x_row[i]));
    sum_squares = __dadd_rn(sum_squares, __dmul_rn(value, value));
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    sum_squares = __dadd_rn(sum_squares, __shfl_down_sync(0xffffffffu, sum_squares, offset));
  }
  if (lane == 0) warp_sums[warp] = sum_squares;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kWarps; ++w) total = __dadd_rn(total, warp_sums[w]);
    const float variance = __double2float_rn(__ddiv_rn(total, static_cast<double>(hidden)));
    inverse_rms_shared = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(variance, eps)));
  }
  __syncthreads();
  const float inverse_rms = inverse_rms_shared;
  for (int i = static_cast<int>(threadIdx.x); i < hidden; i += kThreads) {
    const float normalized = round_bf16(__fmul_rn(to_float(x_row[i]), inverse_rms));
    out_row[i] = __float2bfloat16_rn(__fmul_rn(to_float(weight[i]), normalized));
  }
}

}  // namespace

void rms_norm(const __nv_bfloat16* x, const __nv_bfloat16* weight, int rows, int hidden, float eps,
              __nv_bfloat16* out, cudaStream_t stream) {
  using kernel_checks::require;
  require(hidden > 0, "rms_norm", "hidden must be positive, got " + std::to_string(hidden));
  require(rows >= 0, "rms_norm", "rows must be non-negative, got " + std::to_string(rows));
  require(eps >= 0.0f, "rms_norm", "eps must be non-negative, got " + std::to_string(eps));
  if (rows == 0) return;
  require(x != nullptr && weight != nullptr && out != nullptr, "rms_norm",
          "x, weight and out must be device pointers, got a null pointer");
  rms_norm_kernel<<<static_cast<unsigned int>(rows), kThreads, 0, stream>>>(x, weight, hidden, eps,
                                                                            out);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace kvaudit::cuda
