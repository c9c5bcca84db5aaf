// Capture kernels (capture_kernels.h). Compiled with -fmad=false: every fused multiply-add is
// written out (eager_softmax_device.cuh); fp64 sums are plain multiplies and adds in the CPU's
// order.
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

#include "runners/cuda/capture/capture_kernels.h"
#include "runners/cuda/capture/eager_softmax_device.cuh"
#include "runners/cuda/cuda_check.h"

namespace kvaudit::cuda {
namespace {

using capture_device::eager_logit;
using capture_device::eager_probability;
using capture_device::vector_exp;

constexpr int kElementThreads = 256;  // grid-stride copy kernels
constexpr int kRowThreads = 128;      // eager_row_statistics: one block per (row, head)
constexpr int kColumnTile = 64;       // eager_column_sums: columns per block (one per thread)
constexpr int kRowTile = 32;          // eager_column_sums: query rows staged per step
constexpr int kMomentThreads = 128;
constexpr int kMaxHeadDim = 512;

void require(bool ok, const char* function, const std::string& message) {
  if (!ok) throw std::invalid_argument(std::string("cuda capture ") + function + ": " + message);
}

unsigned grid_for(std::size_t total, int threads) {
  const std::size_t blocks =
      (total + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads);
  // Grid-stride loops cover the rest.
  return static_cast<unsigned>(blocks < 65535 * 16 ? (blocks == 0 ? 1 : blocks) : 65535 * 16);
}

void check_problem(const EagerProblem& p, const char* function) {
  require(p.queries != nullptr && p.keys != nullptr, function, "null queries or keys");
  require(p.num_heads > 0 && p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0, function,
          "heads " + std::to_string(p.num_heads) + " / kv heads " + std::to_string(p.num_kv_heads) +
              " are not a positive multiple");
  require(p.head_dim > 0 && p.head_dim <= kMaxHeadDim, function,
          "head_dim " + std::to_string(p.head_dim) + " outside 1.." + std::to_string(kMaxHeadDim));
  require(p.rows > 0 && p.rows <= p.key_rows, function,
          "rows " + std::to_string(p.rows) + " must be in 1..key_rows (" +
              std::to_string(p.key_rows) + ")");
  require(p.num_heads <= 65535, function, "more than 65535 heads");
}

// ---- copies -------------------------------------------------------------------------------------

__global__ void copy_kv_prefix_kernel(DeviceSequenceKv sequence, int layer, int rows, float* keys,
                                      float* values) {
  const std::size_t per_head =
      static_cast<std::size_t>(rows) * static_cast<std::size_t>(sequence.head_dim);
  const std::size_t total = per_head * static_cast<std::size_t>(sequence.num_kv_heads);
  for (std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int g = static_cast<int>(idx / per_head);
    const std::size_t within = idx % per_head;  // j·d + c: slot j, element c
    const std::size_t source = sequence.row_offset(layer, g) + within;
    keys[idx] = __bfloat162float(sequence.keys[source]);
    values[idx] = __bfloat162float(sequence.values[source]);
  }
}

__global__ void copy_position_prefix_kernel(DeviceSequenceKv sequence, int layer, int rows,
                                            std::int32_t* out) {
  const std::size_t total =
      static_cast<std::size_t>(rows) * static_cast<std::size_t>(sequence.num_kv_heads);
  for (std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int g = static_cast<int>(idx / static_cast<std::size_t>(rows));
    const std::size_t slot = idx % static_cast<std::size_t>(rows);
    out[idx] = sequence.positions[sequence.position_offset(layer, g) + slot];
  }
}

__global__ void gather_window_kernel(const __nv_bfloat16* queries, int heads, int dim, int boundary,
                                     int window, float* out) {
  const std::size_t per_head = static_cast<std::size_t>(window) * static_cast<std::size_t>(dim);
  const std::size_t total = per_head * static_cast<std::size_t>(heads);
  for (std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t h = idx / per_head;
    const std::size_t r = (idx % per_head) / static_cast<std::size_t>(dim);
    const std::size_t c = idx % static_cast<std::size_t>(dim);
    const std::size_t row = static_cast<std::size_t>(boundary - window) + r;
    out[idx] = __bfloat162float(
        queries[(row * static_cast<std::size_t>(heads) + h) * static_cast<std::size_t>(dim) + c]);
  }
}

// ---- eager attention ----------------------------------------------------------------------------

__device__ __forceinline__ const float* key_base(const EagerProblem& p, int head) {
  const int group = p.num_heads / p.num_kv_heads;
  return p.keys + static_cast<std::size_t>(head / group) * static_cast<std::size_t>(p.key_rows) *
                      static_cast<std::size_t>(p.head_dim);
}

__device__ __forceinline__ float query_element(const EagerProblem& p, int row, int head, int e) {
  return __bfloat162float(p.queries[(static_cast<std::size_t>(row) * p.num_heads + head) *
                                        static_cast<std::size_t>(p.head_dim) +
                                    static_cast<std::size_t>(e)]);
}

// One block per (row i, head h): max over j ≤ i of the logits, then Σ vector_exp(s − max) in
// fp64 (a fixed tree, so the result does not depend on scheduling), rounded once to f32.
__global__ void __launch_bounds__(kRowThreads)
    row_statistics_kernel(EagerProblem p, float* row_max, float* row_sum) {
  extern __shared__ float query_row[];  // [d]
  __shared__ float max_part[kRowThreads];
  __shared__ double sum_part[kRowThreads];
  const int i = static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int tid = static_cast<int>(threadIdx.x);
  for (int e = tid; e < p.head_dim; e += kRowThreads) query_row[e] = query_element(p, i, h, e);
  __syncthreads();
  const float* keys = key_base(p, h);
  const std::size_t dim = static_cast<std::size_t>(p.head_dim);

  float local_max = -INFINITY;
  for (int j = tid; j <= i; j += kRowThreads) {
    const float s = eager_logit(
        capture_device::dot_fma(query_row, keys + static_cast<std::size_t>(j) * dim, p.head_dim),
        p.scale, p.bf16);
    local_max = s > local_max ? s : local_max;
  }
  max_part[tid] = local_max;
  __syncthreads();
  for (int stride = kRowThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) {
      const float other = max_part[tid + stride];
      max_part[tid] = other > max_part[tid] ? other : max_part[tid];
    }
    __syncthreads();
  }
  const float top = max_part[0];

  double local_sum = 0.0;
  for (int j = tid; j <= i; j += kRowThreads) {
    const float s = eager_logit(
        capture_device::dot_fma(query_row, keys + static_cast<std::size_t>(j) * dim, p.head_dim),
        p.scale, p.bf16);
    local_sum += static_cast<double>(vector_exp(__fsub_rn(s, top)));
  }
  sum_part[tid] = local_sum;
  __syncthreads();
  for (int stride = kRowThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) sum_part[tid] += sum_part[tid + stride];
    __syncthreads();
  }
  if (tid == 0) {
    const std::size_t at = static_cast<std::size_t>(h) * static_cast<std::size_t>(p.rows) +
                           static_cast<std::size_t>(i);
    row_max[at] = top;
    row_sum[at] = static_cast<float>(sum_part[0]);
  }
}

std::size_t column_shared_bytes(int head_dim) {
  return (static_cast<std::size_t>(kColumnTile + kRowTile) * static_cast<std::size_t>(head_dim) +
          2 * static_cast<std::size_t>(kRowTile)) *
         sizeof(float);
}

// Block (column tile, head h); thread t owns column j = tile·64 + t and adds p(i, j) for
// i = j, j+1, ... in increasing order in fp64, storing the running sum at every boundary.
__global__ void __launch_bounds__(kColumnTile)
    column_sums_kernel(EagerProblem p, const float* row_max, const float* row_sum,
                       ColumnSumTargets targets) {
  extern __shared__ float shared[];
  float* keys_t = shared;                                 // [d][kColumnTile]
  float* query_tile = keys_t + kColumnTile * p.head_dim;  // [kRowTile][d]
  float* max_tile = query_tile + kRowTile * p.head_dim;   // [kRowTile]
  float* sum_tile = max_tile + kRowTile;                  // [kRowTile]
  const int tid = static_cast<int>(threadIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int c0 = static_cast<int>(blockIdx.x) * kColumnTile;
  const int j = c0 + tid;
  const bool valid = j < p.rows;
  const int dim = p.head_dim;
  const float* keys = key_base(p, h);

  for (int idx = tid; idx < kColumnTile * dim; idx += kColumnTile) {
    const int column = idx / dim;
    const int e = idx % dim;
    const int key = c0 + column;
    keys_t[e * kColumnTile + column] =
        key < p.rows ? keys[static_cast<std::size_t>(key) * static_cast<std::size_t>(dim) + e]
                     : 0.0f;
  }

  double acc = 0.0;
  for (int r0 = c0; r0 < p.rows; r0 += kRowTile) {
    __syncthreads();  // the previous tile is consumed (and, first time, keys_t is written)
    for (int idx = tid; idx < kRowTile * dim; idx += kColumnTile) {
      const int rr = idx / dim;
      const int e = idx % dim;
      const int i = r0 + rr;
      query_tile[idx] = i < p.rows ? query_element(p, i, h, e) : 0.0f;
    }
    for (int rr = tid; rr < kRowTile; rr += kColumnTile) {
      const int i = r0 + rr;
      const std::size_t at = static_cast<std::size_t>(h) * static_cast<std::size_t>(p.rows) +
                             static_cast<std::size_t>(i);
      max_tile[rr] = i < p.rows ? row_max[at] : 0.0f;
      sum_tile[rr] = i < p.rows ? row_sum[at] : 1.0f;
    }
    __syncthreads();
    if (!valid) continue;
    for (int rr = 0; rr < kRowTile; ++rr) {
      const int i = r0 + rr;
      if (i >= p.rows) break;
      if (i < j) continue;  // causal: row i sees keys 0..i
      float dot = 0.0f;
      const float* q = query_tile + rr * dim;
      for (int e = 0; e < dim; ++e) dot = __fmaf_rn(q[e], keys_t[e * kColumnTile + tid], dot);
      const float prob =
          eager_probability(eager_logit(dot, p.scale, p.bf16), max_tile[rr], sum_tile[rr], p.bf16);
      acc = __dadd_rn(acc, static_cast<double>(prob));
      for (int k = 0; k < targets.count; ++k) {
        const int b = targets.boundaries[k];
        if (i + 1 == b && j < b) {
          targets.outputs[k][static_cast<std::size_t>(h) * static_cast<std::size_t>(b) +
                             static_cast<std::size_t>(j)] = static_cast<float>(acc);
        }
      }
    }
  }
}

__global__ void probability_matrix_kernel(EagerProblem p, const float* row_max,
                                          const float* row_sum, float* out) {
  const std::size_t rows = static_cast<std::size_t>(p.rows);
  const std::size_t total = static_cast<std::size_t>(p.num_heads) * rows * rows;
  for (std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int h = static_cast<int>(idx / (rows * rows));
    const int i = static_cast<int>((idx / rows) % rows);
    const int j = static_cast<int>(idx % rows);
    if (j > i) {
      out[idx] = 0.0f;
      continue;
    }
    const float* keys = key_base(p, h) + static_cast<std::size_t>(j) * p.head_dim;
    float dot = 0.0f;
    for (int e = 0; e < p.head_dim; ++e) dot = __fmaf_rn(query_element(p, i, h, e), keys[e], dot);
    const std::size_t at = static_cast<std::size_t>(h) * rows + static_cast<std::size_t>(i);
    out[idx] =
        eager_probability(eager_logit(dot, p.scale, p.bf16), row_max[at], row_sum[at], p.bf16);
  }
}

// ---- query moments ------------------------------------------------------------------------------

// Thread t of head h: t < d² → outer[e, f] (e = t / d, f = t % d); d² ≤ t < d² + d → sum[t − d²].
__global__ void __launch_bounds__(kMomentThreads)
    moments_kernel(const __nv_bfloat16* queries, int heads, int dim, int first_row,
                   MomentTargets targets) {
  const int h = static_cast<int>(blockIdx.y);
  const long long t = static_cast<long long>(blockIdx.x) * kMomentThreads + threadIdx.x;
  const long long outer_count = static_cast<long long>(dim) * dim;
  if (t >= outer_count + dim) return;
  const bool outer = t < outer_count;
  const int e = outer ? static_cast<int>(t / dim) : static_cast<int>(t - outer_count);
  const int f = outer ? static_cast<int>(t % dim) : 0;
  const std::size_t hd = static_cast<std::size_t>(h) * static_cast<std::size_t>(dim);
  const int last = targets.boundaries[targets.count - 1];
  double acc = 0.0;
  for (int r = first_row; r < last; ++r) {
    const std::size_t row = (static_cast<std::size_t>(r) * static_cast<std::size_t>(heads)) *
                                static_cast<std::size_t>(dim) +
                            hd;
    const double qe = static_cast<double>(__bfloat162float(queries[row + e]));
    if (outer) {
      const double qf = static_cast<double>(__bfloat162float(queries[row + f]));
      acc = __dadd_rn(acc, __dmul_rn(qe, qf));
    } else {
      acc = __dadd_rn(acc, qe);
    }
    for (int k = 0; k < targets.count; ++k) {
      if (r + 1 != targets.boundaries[k]) continue;
      if (outer) {
        targets.outers[k][(hd + static_cast<std::size_t>(e)) * static_cast<std::size_t>(dim) +
                          static_cast<std::size_t>(f)] = acc;
      } else {
        targets.sums[k][hd + static_cast<std::size_t>(e)] = acc;
      }
    }
  }
}

}  // namespace

void copy_kv_prefix(const DeviceSequenceKv& sequence, int layer, int rows, float* keys_out,
                    float* values_out, cudaStream_t stream) {
  require(sequence.keys != nullptr && sequence.values != nullptr && keys_out != nullptr &&
              values_out != nullptr,
          "copy_kv_prefix", "null pointer");
  require(layer >= 0 && sequence.num_kv_heads > 0 && sequence.head_dim > 0, "copy_kv_prefix",
          "bad layer or cache shape");
  require(rows > 0 && rows <= sequence.capacity, "copy_kv_prefix",
          "rows " + std::to_string(rows) + " outside 1..capacity (" +
              std::to_string(sequence.capacity) + ")");
  const std::size_t total = static_cast<std::size_t>(sequence.num_kv_heads) *
                            static_cast<std::size_t>(rows) *
                            static_cast<std::size_t>(sequence.head_dim);
  copy_kv_prefix_kernel<<<grid_for(total, kElementThreads), kElementThreads, 0, stream>>>(
      sequence, layer, rows, keys_out, values_out);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

void copy_position_prefix(const DeviceSequenceKv& sequence, int layer, int rows,
                          std::int32_t* positions_out, cudaStream_t stream) {
  require(sequence.positions != nullptr && positions_out != nullptr, "copy_position_prefix",
          "null pointer");
  require(layer >= 0 && sequence.num_kv_heads > 0, "copy_position_prefix", "bad layer or shape");
  require(rows > 0 && rows <= sequence.capacity, "copy_position_prefix",
          "rows " + std::to_string(rows) + " outside 1..capacity (" +
              std::to_string(sequence.capacity) + ")");
  const std::size_t total =
      static_cast<std::size_t>(sequence.num_kv_heads) * static_cast<std::size_t>(rows);
  copy_position_prefix_kernel<<<grid_for(total, kElementThreads), kElementThreads, 0, stream>>>(
      sequence, layer, rows, positions_out);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

void gather_window_queries(const __nv_bfloat16* queries, int num_heads, int head_dim, int boundary,
                           int window, float* out, cudaStream_t stream) {
  require(queries != nullptr && out != nullptr, "gather_window_queries", "null pointer");
  require(num_heads > 0 && head_dim > 0, "gather_window_queries", "bad head shape");
  require(window >= 0 && window <= boundary, "gather_window_queries",
          "window " + std::to_string(window) + " outside 0..boundary (" + std::to_string(boundary) +
              ")");
  if (window == 0) return;
  const std::size_t total = static_cast<std::size_t>(num_heads) * static_cast<std::size_t>(window) *
                            static_cast<std::size_t>(head_dim);
  gather_window_kernel<<<grid_for(total, kElementThreads), kElementThreads, 0, stream>>>(
      queries, num_heads, head_dim, boundary, window, out);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

void eager_row_statistics(const EagerProblem& problem, float* row_max, float* row_sum,
                          cudaStream_t stream) {
  check_problem(problem, "eager_row_statistics");
  require(row_max != nullptr && row_sum != nullptr, "eager_row_statistics", "null output");
  const dim3 grid(static_cast<unsigned>(problem.rows), static_cast<unsigned>(problem.num_heads));
  const std::size_t shared = static_cast<std::size_t>(problem.head_dim) * sizeof(float);
  row_statistics_kernel<<<grid, kRowThreads, shared, stream>>>(problem, row_max, row_sum);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

void eager_column_sums(const EagerProblem& problem, const float* row_max, const float* row_sum,
                       const ColumnSumTargets& targets, cudaStream_t stream) {
  check_problem(problem, "eager_column_sums");
  require(row_max != nullptr && row_sum != nullptr, "eager_column_sums", "null statistics");
  require(targets.count >= 1 && targets.count <= kMaxCaptureBoundaries, "eager_column_sums",
          "between 1 and " + std::to_string(kMaxCaptureBoundaries) + " boundaries are served");
  for (int k = 0; k < targets.count; ++k) {
    require(targets.outputs[k] != nullptr, "eager_column_sums", "null output");
    require(
        targets.boundaries[k] >= 1 && targets.boundaries[k] <= problem.rows &&
            (k == 0 || targets.boundaries[k] > targets.boundaries[k - 1]),
        "eager_column_sums",
        "boundaries must ascend strictly within 1..rows (" + std::to_string(problem.rows) + ")");
  }
  const std::size_t shared = column_shared_bytes(problem.head_dim);
  if (shared > 48 * 1024) {
    KVAUDIT_CUDA_CHECK(cudaFuncSetAttribute(
        column_sums_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  }
  const dim3 grid(static_cast<unsigned>((problem.rows + kColumnTile - 1) / kColumnTile),
                  static_cast<unsigned>(problem.num_heads));
  column_sums_kernel<<<grid, kColumnTile, shared, stream>>>(problem, row_max, row_sum, targets);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

void eager_probability_matrix(const EagerProblem& problem, const float* row_max,
                              const float* row_sum, float* out, cudaStream_t stream) {
  check_problem(problem, "eager_probability_matrix");
  require(row_max != nullptr && row_sum != nullptr && out != nullptr, "eager_probability_matrix",
          "null pointer");
  const std::size_t total = static_cast<std::size_t>(problem.num_heads) *
                            static_cast<std::size_t>(problem.rows) *
                            static_cast<std::size_t>(problem.rows);
  probability_matrix_kernel<<<grid_for(total, kElementThreads), kElementThreads, 0, stream>>>(
      problem, row_max, row_sum, out);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

void query_moments(const __nv_bfloat16* queries_pre_rope, int num_heads, int head_dim,
                   int first_row, const MomentTargets& targets, cudaStream_t stream) {
  require(queries_pre_rope != nullptr, "query_moments", "null queries");
  require(num_heads > 0 && num_heads <= 65535 && head_dim > 0 && head_dim <= kMaxHeadDim,
          "query_moments", "bad head shape");
  require(first_row >= 0, "query_moments", "negative first row");
  require(targets.count >= 1 && targets.count <= kMaxCaptureBoundaries, "query_moments",
          "between 1 and " + std::to_string(kMaxCaptureBoundaries) + " boundaries are served");
  for (int k = 0; k < targets.count; ++k) {
    require(targets.sums[k] != nullptr && targets.outers[k] != nullptr, "query_moments",
            "null output");
    require(
        targets.boundaries[k] >= 1 && (k == 0 || targets.boundaries[k] > targets.boundaries[k - 1]),
        "query_moments", "boundaries must be positive and strictly ascending");
  }
  // Boundaries at or below first_row keep their zero sums: clear every output first.
  for (int k = 0; k < targets.count; ++k) {
    const std::size_t hd = static_cast<std::size_t>(num_heads) * static_cast<std::size_t>(head_dim);
    KVAUDIT_CUDA_CHECK(cudaMemsetAsync(targets.sums[k], 0, hd * sizeof(double), stream));
    KVAUDIT_CUDA_CHECK(cudaMemsetAsync(
        targets.outers[k], 0, hd * static_cast<std::size_t>(head_dim) * sizeof(double), stream));
  }
  const long long per_head = static_cast<long long>(head_dim) * head_dim + head_dim;
  const dim3 grid(static_cast<unsigned>((per_head + kMomentThreads - 1) / kMomentThreads),
                  static_cast<unsigned>(num_heads));
  moments_kernel<<<grid, kMomentThreads, 0, stream>>>(queries_pre_rope, num_heads, head_dim,
                                                      first_row, targets);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace kvaudit::cuda
