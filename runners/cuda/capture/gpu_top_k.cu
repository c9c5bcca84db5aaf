// Per-head top-k by exact rank counting (gpu_top_k.h).
#include <cstddef>
#include <stdexcept>
#include <string>

#include "runners/cuda/capture/gpu_top_k.h"
#include "runners/cuda/cuda_check.h"
#include "runners/cuda/device_buffer.h"

namespace kvaudit::cuda {
namespace {

constexpr int kRankThreads = 256;
constexpr int kScanThreads = 1024;

// methods::ranks_before: a (at ia) ranks before b (at ib).
__device__ __forceinline__ bool ranks_before(float a, int ia, float b, int ib) {
  const bool a_nan = a != a;
  const bool b_nan = b != b;
  if (a_nan != b_nan) return a_nan;
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

// Block (tile, head g): thread j counts the positions of head g ranking before it.
__global__ void __launch_bounds__(kRankThreads)
    rank_flags_kernel(const float* scores, int length, long long n_kept, std::uint8_t* keep) {
  __shared__ float tile[kRankThreads];
  const int g = static_cast<int>(blockIdx.y);
  const int tid = static_cast<int>(threadIdx.x);
  const int j = static_cast<int>(blockIdx.x) * kRankThreads + tid;
  const float* row = scores + static_cast<std::size_t>(g) * static_cast<std::size_t>(length);
  const bool valid = j < length;
  const float mine = valid ? row[j] : 0.0f;
  long long rank = 0;
  for (int base = 0; base < length; base += kRankThreads) {
    __syncthreads();  // the previous tile is consumed
    const int i = base + tid;
    tile[tid] = i < length ? row[i] : 0.0f;
    __syncthreads();
    if (!valid) continue;
    const int count = length - base < kRankThreads ? length - base : kRankThreads;
    for (int t = 0; t < count; ++t) rank += ranks_before(tile[t], base + t, mine, j) ? 1 : 0;
  }
  if (valid) {
    keep[static_cast<std::size_t>(g) * static_cast<std::size_t>(length) +
         static_cast<std::size_t>(j)] = rank < n_kept ? 1 : 0;
  }
}

// Block g: positions with keep = 1 in ascending order into kept[g, ·] (chunked inclusive scan).
__global__ void __launch_bounds__(kScanThreads)
    compact_kernel(const std::uint8_t* keep, int length, long long n_kept, std::int32_t* kept) {
  __shared__ int scan[kScanThreads];
  const int g = static_cast<int>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  const std::uint8_t* flags = keep + static_cast<std::size_t>(g) * static_cast<std::size_t>(length);
  std::int32_t* out = kept + static_cast<std::size_t>(g) * static_cast<std::size_t>(n_kept);
  long long offset = 0;
  for (int base = 0; base < length; base += kScanThreads) {
    const int j = base + tid;
    const int flag = j < length ? flags[j] : 0;
    scan[tid] = flag;
    __syncthreads();
    for (int step = 1; step < kScanThreads; step *= 2) {
      const int add = tid >= step ? scan[tid - step] : 0;
      __syncthreads();
      scan[tid] += add;
      __syncthreads();
    }
    const long long at = offset + scan[tid] - 1;
    if (flag && at < n_kept) out[at] = j;
    offset += scan[kScanThreads - 1];
    __syncthreads();  // scan[] is rewritten by the next chunk
  }
}

}  // namespace

void select_top_k_on_gpu(const float* scores, int num_kv_heads, int length, std::int64_t n_kept,
                         std::int32_t* kept, cudaStream_t stream) {
  if (num_kv_heads < 1 || num_kv_heads > 65535 || length < 1)
    throw std::invalid_argument("select_top_k_on_gpu: " + std::to_string(num_kv_heads) +
                                " heads × " + std::to_string(length) +
                                " positions (need 1..65535 heads and L >= 1)");
  if (n_kept < 0 || n_kept > length)
    throw std::invalid_argument("select_top_k_on_gpu: n_kept " + std::to_string(n_kept) +
                                " outside 0..L (" + std::to_string(length) + ")");
  if (n_kept == 0) return;
  if (scores == nullptr || kept == nullptr)
    throw std::invalid_argument("select_top_k_on_gpu: null scores or kept buffer");
  DeviceBuffer<std::uint8_t> keep(static_cast<std::size_t>(num_kv_heads) *
                                  static_cast<std::size_t>(length));
  const dim3 grid(static_cast<unsigned>((length + kRankThreads - 1) / kRankThreads),
                  static_cast<unsigned>(num_kv_heads));
  rank_flags_kernel<<<grid, kRankThreads, 0, stream>>>(scores, length, n_kept, keep.data());
  KVAUDIT_CUDA_CHECK_LAUNCH();
  compact_kernel<<<static_cast<unsigned>(num_kv_heads), kScanThreads, 0, stream>>>(
      keep.data(), length, n_kept, kept);
  KVAUDIT_CUDA_CHECK_LAUNCH();
  // `keep` is freed on return: wait for the kernels that read it.
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::vector<std::vector<std::int32_t>> select_top_k_on_gpu(const float* scores, int num_kv_heads,
                                                           int length, std::int64_t n_kept,
                                                           cudaStream_t stream) {
  const std::size_t per_head = n_kept > 0 ? static_cast<std::size_t>(n_kept) : 0;
  DeviceBuffer<std::int32_t> kept(static_cast<std::size_t>(num_kv_heads > 0 ? num_kv_heads : 0) *
                                  per_head);
  select_top_k_on_gpu(scores, num_kv_heads, length, n_kept, kept.data(), stream);
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<std::int32_t> flat =
      kept.empty() ? std::vector<std::int32_t>{} : kept.to_host();
  std::vector<std::vector<std::int32_t>> result(static_cast<std::size_t>(num_kv_heads));
  for (std::size_t g = 0; g < result.size(); ++g)
    result[g].assign(flat.begin() + static_cast<std::ptrdiff_t>(g * per_head),
                     flat.begin() + static_cast<std::ptrdiff_t>((g + 1) * per_head));
  return result;
}

}  // namespace kvaudit::cuda
