// eager prefill attention: HF `eager_attention_forward`, materialized, the twin of
// cpu::attention_eager (runners/cpu/attention_eager.cpp). For each KV head g and each chunk of
// query rows (sized so the group's scores [group, chunk_rows, keys] bf16 fit the workspace):
//   S = [Q·Kᵀ]                 cuBLAS strided-batched over the group's query heads, bf16 out,
//                              fp32 accumulation (reduced-precision split-K reductions disallowed)
//   s = [s·scale]              then masked: entries at positions > the query's get p = 0 exactly
//   p = [exp(s − max) / Σ exp(s − max)]   fp32 softmax over the row's visible entries
//   O = [P·V]                  cuBLAS, bf16 out, written into out's [T, H, d] rows
// ([] = bf16 round to nearest even). The chunk's key count is the entries visible to its last row,
// n = kv_length − (last_query_position − that row's position) (prefill_attention_checks.h); the
// softmax kernel masks each row by its own positions (binary search over the head's positions).
// cuBLAS is column-major: S row-major [rows, n] is Sᵀ column-major, Sᵀ = K·Qᵀ with K read as a
// transposed d × n matrix (lda = d) and the head's queries as a d × rows matrix (ldb = H·d).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "runners/cuda/attention/prefill_attention.h"
#include "runners/cuda/attention/prefill_attention_checks.h"
#include "runners/cuda/attention/visible_keys.cuh"
#include "runners/cuda/cuda_check.h"

namespace kvaudit::cuda {
namespace {

constexpr int kSoftmaxThreads = 256;
constexpr int kScoreAlignment = 8;  // score rows padded to 8 bf16 (16 bytes) for cuBLAS
constexpr int kMaxGridY = 65535;    // the group is grid y


// Reduces `value` over the block (kSoftmaxThreads threads); every thread gets the result.
template <bool Max>
__device__ float block_reduce(float value, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = Max ? fmaxf(value, other) : value + other;
  }
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float result = scratch[0];
  for (int w = 1; w < kSoftmaxThreads / 32; ++w) {
    result = Max ? fmaxf(result, scratch[w]) : result + scratch[w];
  }
  return result;
}

// One block per (score row, query head of the group): scores [group, chunk_rows, stride] in place.
// Entries j < visible: s = [s·scale], p = [exp(s − max)/Σ]; visible ≤ j < keys: p = 0.
__global__ void __launch_bounds__(kSoftmaxThreads)
    eager_softmax_kernel(__nv_bfloat16* scores, int chunk_rows, int stride, int keys,
                         const std::int32_t* positions, const std::int32_t* query_positions,
                         float scale) {
  __shared__ float scratch[kSoftmaxThreads / 32];
  const int row = static_cast<int>(blockIdx.x);
  const int head_in_group = static_cast<int>(blockIdx.y);
  __nv_bfloat16* s =
      scores + (static_cast<std::size_t>(head_in_group) * static_cast<std::size_t>(chunk_rows) +
                static_cast<std::size_t>(row)) *
                   static_cast<std::size_t>(stride);
  const int visible = visible_prefix(positions, keys, query_positions[row]);
  const int first = static_cast<int>(threadIdx.x);

  float max_score = -__int_as_float(0x7f800000);
  for (int j = first; j < visible; j += kSoftmaxThreads) {
    const __nv_bfloat16 scaled = __float2bfloat16_rn(__fmul_rn(__bfloat162float(s[j]), scale));
    s[j] = scaled;  // read back by this same thread below
    max_score = fmaxf(max_score, __bfloat162float(scaled));
  }
  max_score = block_reduce<true>(max_score, scratch);

  float sum = 0.0f;
  for (int j = first; j < visible; j += kSoftmaxThreads) {
    sum += expf(__fsub_rn(__bfloat162float(s[j]), max_score));
  }
  sum = block_reduce<false>(sum, scratch);

  for (int j = first; j < keys; j += kSoftmaxThreads) {
    float p = 0.0f;
    if (j < visible) p = __fdiv_rn(expf(__fsub_rn(__bfloat162float(s[j]), max_score)), sum);
    s[j] = __float2bfloat16_rn(p);
  }
}

// For the scope: host pointers for alpha/beta and CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION
// (a split-K GEMM never sums partials in bf16) on the caller's handle; its modes are restored
// after.
class HandleModeScope {
 public:
  explicit HandleModeScope(cublasHandle_t handle) : handle_(handle) {
    KVAUDIT_CUBLAS_CHECK(cublasGetMathMode(handle_, &previous_math_));
    KVAUDIT_CUBLAS_CHECK(cublasGetPointerMode(handle_, &previous_pointer_));
    KVAUDIT_CUBLAS_CHECK(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
    KVAUDIT_CUBLAS_CHECK(cublasSetMathMode(
        handle_, static_cast<cublasMath_t>(previous_math_ |
                                           CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  }
  HandleModeScope(const HandleModeScope&) = delete;
  HandleModeScope& operator=(const HandleModeScope&) = delete;
  ~HandleModeScope() {
    cublasSetMathMode(handle_, previous_math_);
    cublasSetPointerMode(handle_, previous_pointer_);
  }

 private:
  cublasHandle_t handle_;
  cublasMath_t previous_math_ = CUBLAS_DEFAULT_MATH;
  cublasPointerMode_t previous_pointer_ = CUBLAS_POINTER_MODE_HOST;
};

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

EagerWorkspace::EagerWorkspace(std::size_t bytes) : scores_(bytes / sizeof(__nv_bfloat16)) {}

void prefill_attention_eager(const PrefillAttentionProblem& problem, EagerWorkspace& workspace,
                             cublasHandle_t handle, cudaStream_t stream) {
  constexpr const char* kName = "prefill_attention_eager";
  validate_prefill_attention(problem, kName);
  if (handle == nullptr)
    throw std::invalid_argument(std::string(kName) + ": cuBLAS handle is null");
  cudaStream_t handle_stream = nullptr;
  KVAUDIT_CUBLAS_CHECK(cublasGetStream(handle, &handle_stream));
  if (handle_stream != stream) {
    throw std::invalid_argument(std::string(kName) +
                                ": the cuBLAS handle is not bound to `stream` (cublasSetStream)");
  }

  const int heads = problem.num_heads;
  const int group = heads / problem.num_kv_heads;
  const int dim = problem.head_dim;
  const std::int64_t longest =
      *std::max_element(problem.kv_lengths.begin(), problem.kv_lengths.end());
  const std::int64_t row_bytes = static_cast<std::int64_t>(group) *
                                 round_up(longest, kScoreAlignment) *
                                 static_cast<std::int64_t>(sizeof(__nv_bfloat16));
  const std::int64_t fitting_rows = static_cast<std::int64_t>(workspace.bytes()) / row_bytes;
  if (fitting_rows < 1) {
    throw std::invalid_argument(
        std::string(kName) + ": EagerWorkspace of " + std::to_string(workspace.bytes()) +
        " bytes cannot hold one row of scores (" + std::to_string(row_bytes) + " bytes for " +
        std::to_string(group) + " heads × " + std::to_string(longest) + " keys)");
  }
  if (group > kMaxGridY || static_cast<std::int64_t>(heads) * dim > INT32_MAX) {
    throw std::invalid_argument(
        std::string(kName) + ": num_heads = " + std::to_string(heads) +
        " with num_kv_heads = " + std::to_string(problem.num_kv_heads) +
        " exceeds the launch limits (group ≤ 65535, num_heads·head_dim < 2³¹)");
  }
  const int chunk_rows = static_cast<int>(std::min<std::int64_t>(fitting_rows, problem.rows));

  const DeviceSequenceKv& kv = problem.sequence;
  const std::int64_t query_stride = static_cast<std::int64_t>(heads) * dim;  // ld of a head's rows
  const float one = 1.0f;
  const float zero = 0.0f;
  HandleModeScope handle_modes(handle);
  for (int kv_head = 0; kv_head < problem.num_kv_heads; ++kv_head) {
    const __nv_bfloat16* keys = kv.keys + kv.row_offset(problem.layer, kv_head);
    const __nv_bfloat16* values = kv.values + kv.row_offset(problem.layer, kv_head);
    const std::int32_t* positions = kv.positions + kv.position_offset(problem.layer, kv_head);
    for (int row0 = 0; row0 < problem.rows; row0 += chunk_rows) {
      const int rows = std::min(chunk_rows, problem.rows - row0);
      const std::int32_t last_position = problem.first_query_position + row0 + rows - 1;
      const std::int64_t keys_visible = visible_entries(problem, kv_head, last_position);
      if (keys_visible < 1) {
        throw std::invalid_argument(std::string(kName) + ": kv_lengths[" + std::to_string(kv_head) +
                                    "] leaves no visible key for query position " +
                                    std::to_string(last_position));
      }
      const int n = static_cast<int>(keys_visible);
      const int stride = static_cast<int>(round_up(keys_visible, kScoreAlignment));
      const std::int64_t score_head_stride = static_cast<std::int64_t>(rows) * stride;
      const __nv_bfloat16* queries =
          problem.queries + (static_cast<std::size_t>(row0) * static_cast<std::size_t>(heads) +
                             static_cast<std::size_t>(kv_head) * static_cast<std::size_t>(group)) *
                                static_cast<std::size_t>(dim);
      __nv_bfloat16* out =
          problem.out + (static_cast<std::size_t>(row0) * static_cast<std::size_t>(heads) +
                         static_cast<std::size_t>(kv_head) * static_cast<std::size_t>(group)) *
                            static_cast<std::size_t>(dim);

      // Sᵀ (n × rows, ld stride) = Kᵀᵀ (n × d) · Qᵀ (d × rows), per query head of the group.
      KVAUDIT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          handle, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, dim, &one, keys, CUDA_R_16BF, dim, 0, queries,
          CUDA_R_16BF, static_cast<int>(query_stride), dim, &zero, workspace.scores(), CUDA_R_16BF,
          stride, score_head_stride, group, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));

      const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(group));
      eager_softmax_kernel<<<grid, kSoftmaxThreads, 0, stream>>>(
          workspace.scores(), rows, stride, n, positions, problem.query_positions + row0,
          problem.scale);
      KVAUDIT_CUDA_CHECK_LAUNCH();

      // Oᵀ (d × rows, ld H·d) = Vᵀ (d × n) · Pᵀ (n × rows, ld stride), per query head.
      KVAUDIT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          handle, CUBLAS_OP_N, CUBLAS_OP_N, dim, rows, n, &one, values, CUDA_R_16BF, dim, 0,
          workspace.scores(), CUDA_R_16BF, stride, score_head_stride, &zero, out, CUDA_R_16BF,
          static_cast<int>(query_stride), dim, group, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  }
}

}  // namespace kvaudit::cuda
