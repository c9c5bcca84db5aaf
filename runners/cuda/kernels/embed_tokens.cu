// embed_tokens (kernels.h): out[t, :] = table[tokens[t], :] — a row copy, exact like its CPU twin
// cpu::embed_tokens (runners/cpu/embedding.cpp). Token ids are checked on the host by the caller
// (the vocabulary size is not passed); a negative id traps rather than reading out of bounds.
// One block per token row, threads across the hidden dimension.
#include <cstdint>
#include <string>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/kernels/kernel_checks.h"
#include "runners/cuda/kernels/kernels.h"

namespace kvaudit::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void embed_tokens_kernel(const __nv_bfloat16* table, int hidden,
                                    const std::int32_t* tokens, __nv_bfloat16* out) {
  const std::int64_t row = blockIdx.x;
  const std::int32_t id = tokens[row];
  KVAUDIT_DEVICE_REQUIRE(id >= 0, "embed_tokens: negative token id");
  const __nv_bfloat16* source = table + static_cast<std::int64_t>(id) * hidden;
  __nv_bfloat16* target = out + row * hidden;
  for (int i = static_cast<int>(threadIdx.x); i < hidden; i += kThreads) target[i] = source[i];
}

}  // namespace

void embed_tokens(const __nv_bfloat16* table, int hidden, const std::int32_t* tokens, int rows,
                  __nv_bfloat16* out, cudaStream_t stream) {
  using kernel_checks::require;
  require(hidden > 0, "embed_tokens", "hidden must be positive, got " + std::to_string(hidden));
  require(rows >= 0, "embed_tokens", "rows must be non-negative, got " + std::to_string(rows));
  if (rows == 0) return;
  require(table != nullptr && tokens != nullptr && out != nullptr, "embed_tokens",
          "table, tokens and out must be device pointers, got a null pointer");
  embed_tokens_kernel<<<static_cast<unsigned int>(rows), kThreads, 0, stream>>>(table, hidden,
                                                                                tokens, out);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace kvaudit::cuda
