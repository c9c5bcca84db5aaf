// silu_mul (kernels.h), the twin of cpu::silu_mul (runners/cpu/elementwise.cpp) in Rounding::bf16,
// on the fused gate|up projection gate_up [rows, 2·inter] (gate first):
//   out[r, i] = [ [g / (1 + exp(−g))] · u ],   g = gate_up[r, i], u = gate_up[r, inter + i]
// ([] = bf16 round-to-nearest-even; f32 add, division and product, not contracted).
// exp(−g) is evaluated in fp64 and rounded once to f32: the correctly rounded expf that glibc's
// expf (the CPU's std::exp(float), < 0.502 ulp) also returns, so the two agree except for the
// rarest ties; CUDA's own expf (up to 2 ulp) would differ more often before the bf16 rounding.
// Grid-stride over the rows·inter outputs.
#include <cstdint>
#include <string>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/kernels/device_bf16.cuh"
#include "runners/cuda/kernels/kernel_checks.h"
#include "runners/cuda/kernels/kernels.h"

namespace kvaudit::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void silu_mul_kernel(const __nv_bfloat16* gate_up, std::int64_t rows, int inter,
                                __nv_bfloat16* out) {
  using device_bf16::round_bf16;
  using device_bf16::to_float;
  const std::int64_t count = rows * inter;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count;
       k += stride) {
    const std::int64_t r = k / inter;
    const std::int64_t i = k - r * inter;
    const __nv_bfloat16* row = gate_up + r * 2 * inter;
    const float gate = to_float(row[i]);
    const float up = to_float(row[inter + i]);
    const float exp_negative = __double2float_rn(exp(-static_cast<double>(gate)));
    const float activated = round_bf16(__fdiv_rn(gate, __fadd_rn(1.0f, exp_negative)));
    out[k] = __float2bfloat16_rn(__fmul_rn(activated, up));
  }
}

}  // namespace

void silu_mul(const __nv_bfloat16* gate_up, int rows, int inter, __nv_bfloat16* out,
              cudaStream_t stream) {
  using kernel_checks::require;
  require(rows >= 0, "silu_mul", "rows must be non-negative, got " + std::to_string(rows));
  require(inter > 0, "silu_mul", "inter must be positive, got " + std::to_string(inter));
  if (rows == 0) return;
  require(gate_up != nullptr && out != nullptr, "silu_mul",
          "gate_up and out must be device pointers, got a null pointer");
  const std::int64_t count = static_cast<std::int64_t>(rows) * inter;
  silu_mul_kernel<<<kernel_checks::grid_for(count, kThreads), kThreads, 0, stream>>>(gate_up, rows,
                                                                                     inter, out);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace kvaudit::cuda
