// gather_rows (kernels.h): out[j, :] = x[rows[j], :] for j < count — a row copy (exact), used to
// pick the rows whose logits are needed (the CPU backend indexes those rows directly). A negative
// row index traps (the caller checks the upper bound on the host). One block per output row.
#include <cstdint>
#include <string>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/kernels/kernel_checks.h"
#include "runners/cuda/kernels/kernels.h"

namespace kvaudit::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void gather_rows_kernel(const __nv_bfloat16* x, const std::int32_t* rows, int width,
                                   __nv_bfloat16* out) {
  const std::int64_t j = blockIdx.x;
  const std::int32_t row = rows[j];
  KVAUDIT_DEVICE_REQUIRE(row >= 0, "gather_rows: negative row index");
  const __nv_bfloat16* source = x + static_cast<std::int64_t>(row) * width;
  __nv_bfloat16* target = out + j * width;
  for (int i = static_cast<int>(threadIdx.x); i < width; i += kThreads) target[i] = source[i];
}

}  // namespace

void gather_rows(const __nv_bfloat16* x, const std::int32_t* rows, int count, int width,
                 __nv_bfloat16* out, cudaStream_t stream) {
  using kernel_checks::require;
  require(count >= 0, "gather_rows", "count must be non-negative, got " + std::to_string(count));
  require(width > 0, "gather_rows", "width must be positive, got " + std::to_string(width));
  if (count == 0) return;
  require(x != nullptr && rows != nullptr && out != nullptr, "gather_rows",
          "x, rows and out must be device pointers, got a null pointer");
  gather_rows_kernel<<<static_cast<unsigned int>(count), kThreads, 0, stream>>>(x, rows, width,
                                                                                out);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace kvaudit::cuda
