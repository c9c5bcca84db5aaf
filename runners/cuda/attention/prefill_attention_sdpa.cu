// sdpa prefill attention: FlashAttention-2 forward (Dao 2023, arXiv:2307.08691, Algorithm 1) on
// tensor cores, the twin of cpu::attention_sdpa (runners/cpu/attention_sdpa.cpp) run with
// key_block = kBlockKeys. Per (query row, head), over key tiles of kBlockKeys cache entries:
//   s_j = q·k_j in fp32 (bf16 products, fp32 accumulation on the tensor cores, never rounded)
//   m' = max(m, max_j s_j);  c = scale·log2(e);  M = m'·c (rounded)
//   α = exp2(fma(m, c, −M))  (α = 0 on the first tile);  p_j = exp2(fma(s_j, c, −M))
//   l = fma(l, α, Σ_j p_j) (fp32 p);  acc = α·acc + Σ_j [p_j]·v_j
// The exponent arguments and l are fused multiply-adds, as in the CPU twin (online_row in
// runners/cpu/attention_math_impl.h) and the decode kernel: one rounding, not two.
//   out = [acc / l]                                              ([] = bf16 round to nearest even)
// Only the key visibility rule masks: entry j of the row's KV head is visible iff its position is
// ≤ the query's; positions ascend, so the visible entries are a prefix of length
// upper_bound(positions, query position). A tile in which a row sees nothing leaves that row's
// state untouched (the CPU twin skips it the same way). Tile boundaries are the CPU twin's key
// blocks (multiples of kBlockKeys from entry 0), so m, α and the [p] roundings follow the same
// sequence; only fp32 summation order differs.
//
// Kernel layout: one block = kBlockRows query rows of one query head (grid x = head, y = row
// block, heaviest row blocks first); kWarps warps, each owning kWarpRows rows. Q is staged once and
// kept in registers as wmma fragments; K/V tiles are double-buffered in shared memory with
// cp.async (zero-filled past the block's last visible entry, so no stale slot is ever read); S goes
// through shared memory for the online softmax (two lanes per row); P is written as bf16 and
// P·V accumulates into per-warp fp32 fragments, rescaled by α through a row map of the accumulator
// fragment read once at start (load a matrix whose entries are their row index). The output is
// staged in shared memory (over the K/V buffers) and stored as 16-byte bf16 vectors.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <numbers>
#include <stdexcept>
#include <string>

#include "runners/cuda/attention/prefill_attention.h"
#include "runners/cuda/attention/prefill_attention_checks.h"
#include "runners/cuda/attention/visible_keys.cuh"
#include "runners/cuda/cuda_check.h"

namespace kvaudit::cuda {
namespace {

constexpr int kBlockRows = 64;  // query rows per block
constexpr int kBlockKeys = 64;  // cache entries per key tile (= the CPU twin's key_block)
constexpr int kWarpRows = 16;   // rows per warp (one wmma M)
constexpr int kWarps = kBlockRows / kWarpRows;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxRowBlocks = 65535;  // gridDim.y limit

constexpr std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Shared-memory layout for head dimension D (byte offsets, each a multiple of 128 so every wmma
// pointer is 32-byte aligned; row strides padded by 16 bytes against bank conflicts).
template <int D>
struct SdpaLayout {
  static constexpr int kTileStride = D + 8;            // bf16 per row of the Q, K and V tiles
  static constexpr int kScoreStride = kBlockKeys + 4;  // floats per row of a warp's S tile
  static constexpr int kProbStride = kBlockKeys + 8;   // bf16 per row of a warp's P tile
  static constexpr int kOutStride = D + 4;             // floats per row of the output staging
  static constexpr std::size_t kQBytes = std::size_t{kBlockRows} * kTileStride * 2;
  static constexpr std::size_t kKvTileBytes = std::size_t{kBlockKeys} * kTileStride * 2;
  static constexpr std::size_t kStageBytes = 2 * kKvTileBytes;  // K and V of one stage
  static constexpr std::size_t kKvBytes = 2 * kStageBytes;      // two stages
  static constexpr std::size_t kOutBytes = std::size_t{kBlockRows} * kOutStride * 4;
  static constexpr std::size_t kScoreBytes = std::size_t{kBlockRows} * kScoreStride * 4;
  static constexpr std::size_t kProbBytes = std::size_t{kBlockRows} * kProbStride * 2;
  static constexpr std::size_t kAlphaBytes = std::size_t{kBlockRows} * 4;

  static constexpr std::size_t kQOffset = 0;
  static constexpr std::size_t kKvOffset = round_up(kQOffset + kQBytes, 128);
  // The output staging reuses the K/V buffers after the last tile.
  static constexpr std::size_t kKvRegion = kKvBytes > kOutBytes ? kKvBytes : kOutBytes;
  static constexpr std::size_t kScoreOffset = round_up(kKvOffset + kKvRegion, 128);
  static constexpr std::size_t kProbOffset = round_up(kScoreOffset + kScoreBytes, 128);
  static constexpr std::size_t kAlphaOffset = round_up(kProbOffset + kProbBytes, 128);
  static constexpr std::size_t kInfoOffset = round_up(kAlphaOffset + kAlphaBytes, 128);
  static constexpr std::size_t kTotalBytes = round_up(kInfoOffset + 16, 128);

  static_assert(D % 16 == 0 && kTileStride % 8 == 0 && kProbStride % 8 == 0);
  static_assert(kScoreStride % 4 == 0 && kOutStride % 4 == 0);
  static_assert(kScoreStride >= 16);  // the row-map matrix (16 × 16) is built in the S tile
};

struct SdpaArgs {
  DeviceSequenceKv kv;
  int layer;
  int num_heads;
  int group;  // query heads per KV head
  int rows;
  float scale_log2;  // scale · log2(e), computed on the host exactly as the CPU twin does
  const __nv_bfloat16* queries;
  const std::int32_t* query_positions;
  __nv_bfloat16* out;
};


// 16-byte asynchronous copy global → shared; src_bytes = 0 writes zeros and reads nothing.
__device__ void copy_16_async(void* shared, const void* global, int src_bytes) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global),
               "r"(src_bytes)
               : "memory");
}
__device__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending>
__device__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

// Stages K and V entries [first, first + kBlockKeys) of one head; entries at or past `end` are
// zero-filled (end ≤ the head's length ≤ capacity, so nothing outside the head is read).
template <int D>
__device__ void load_kv_tile_async(const __nv_bfloat16* keys, const __nv_bfloat16* values,
                                   int first, int end, __nv_bfloat16* k_tile,
                                   __nv_bfloat16* v_tile) {
  using Layout = SdpaLayout<D>;
  constexpr int kChunksPerRow = D / 8;  // 16-byte chunks
  for (int chunk = static_cast<int>(threadIdx.x); chunk < kBlockKeys * kChunksPerRow;
       chunk += kThreads) {
    const int row = chunk / kChunksPerRow;
    const int column = (chunk % kChunksPerRow) * 8;
    const int entry = first + row;
    const bool inside = entry < end;
    const std::size_t offset =
        inside ? static_cast<std::size_t>(entry) * D + static_cast<std::size_t>(column) : 0;
    const int bytes = inside ? 16 : 0;
    copy_16_async(k_tile + row * Layout::kTileStride + column, keys + offset, bytes);
    copy_16_async(v_tile + row * Layout::kTileStride + column, values + offset, bytes);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads) sdpa_prefill_kernel(const SdpaArgs args) {
  using namespace nvcuda;
  using Layout = SdpaLayout<D>;
  using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
  using FragKt = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
  using FragV = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
  using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
  constexpr int kDimSteps = D / 16;
  constexpr int kKeySteps = kBlockKeys / 16;
  constexpr int kAccElements = FragAcc::num_elements;
  const float negative_infinity = __int_as_float(static_cast<int>(0xff800000u));

  extern __shared__ __align__(128) unsigned char shared[];
  __nv_bfloat16* q_tile = reinterpret_cast<__nv_bfloat16*>(shared + Layout::kQOffset);
  unsigned char* kv_region = shared + Layout::kKvOffset;
  float* out_stage = reinterpret_cast<float*>(kv_region);  // after the last tile only
  float* scores = reinterpret_cast<float*>(shared + Layout::kScoreOffset);
  __nv_bfloat16* probs = reinterpret_cast<__nv_bfloat16*>(shared + Layout::kProbOffset);
  float* alphas = reinterpret_cast<float*>(shared + Layout::kAlphaOffset);
  int* block_keys_shared = reinterpret_cast<int*>(shared + Layout::kInfoOffset);

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int head = static_cast<int>(blockIdx.x);
  const int row_block = static_cast<int>(gridDim.y - 1 - blockIdx.y);  // heaviest first
  const int row0 = row_block * kBlockRows;
  const int rows_here = min(kBlockRows, args.rows - row0);
  const int kv_head = head / args.group;
  const DeviceSequenceKv& kv = args.kv;
  const std::int32_t* positions = kv.positions + kv.position_offset(args.layer, kv_head);
  const __nv_bfloat16* keys = kv.keys + kv.row_offset(args.layer, kv_head);
  const __nv_bfloat16* values = kv.values + kv.row_offset(args.layer, kv_head);
  const int kv_length = min(max(kv.lengths[kv.head_index(args.layer, kv_head)], 0), kv.capacity);

  // Per-lane row state: lanes 2r and 2r+1 of a warp own row warp·16 + r (columns split in halves).
  const int lane_row = lane >> 1;
  const int lane_half = lane & 1;
  const int block_row = warp * kWarpRows + lane_row;
  const bool row_valid = block_row < rows_here;
  const int visible =
      row_valid ? visible_prefix(positions, kv_length, args.query_positions[row0 + block_row])
                : 0;
  float running_max = negative_infinity;
  float running_sum = 0.0f;

  // Keys the block visits: the most any of its rows sees.
  if (threadIdx.x == 0) *block_keys_shared = 0;
  // Stage the block's queries (rows past the end zero-filled).
  constexpr int kChunksPerRow = D / 8;
  for (int chunk = static_cast<int>(threadIdx.x); chunk < kBlockRows * kChunksPerRow;
       chunk += kThreads) {
    const int row = chunk / kChunksPerRow;
    const int column = (chunk % kChunksPerRow) * 8;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (row < rows_here) {
      const std::size_t offset =
          (static_cast<std::size_t>(row0 + row) * static_cast<std::size_t>(args.num_heads) +
           static_cast<std::size_t>(head)) *
              D +
          static_cast<std::size_t>(column);
      value = *reinterpret_cast<const uint4*>(args.queries + offset);
    }
    *reinterpret_cast<uint4*>(q_tile + row * Layout::kTileStride + column) = value;
  }
  __syncthreads();
  if (lane_half == 0 && visible > 0) atomicMax(block_keys_shared, visible);

  // Row map of the accumulator fragment: element i of this lane holds row row_of[i].
  float* warp_scores = scores + warp * kWarpRows * Layout::kScoreStride;
  for (int i = lane; i < 16 * 16; i += 32) {
    warp_scores[(i / 16) * Layout::kScoreStride + i % 16] = static_cast<float>(i / 16);
  }
  __syncwarp();
  int row_of[kAccElements];
  {
    FragAcc map;
    wmma::load_matrix_sync(map, warp_scores, Layout::kScoreStride, wmma::mem_row_major);
#pragma unroll
    for (int i = 0; i < kAccElements; ++i) row_of[i] = static_cast<int>(map.x[i]);
  }
  __syncwarp();

  FragA q_frag[kDimSteps];
#pragma unroll
  for (int k = 0; k < kDimSteps; ++k) {
    wmma::load_matrix_sync(q_frag[k], q_tile + warp * kWarpRows * Layout::kTileStride + k * 16,
                           Layout::kTileStride);
  }
  FragAcc o_frag[kDimSteps];
#pragma unroll
  for (int f = 0; f < kDimSteps; ++f) wmma::fill_fragment(o_frag[f], 0.0f);

  __syncthreads();  // block_keys_shared complete
  const int block_keys = *block_keys_shared;
  const int tiles = (block_keys + kBlockKeys - 1) / kBlockKeys;

  __nv_bfloat16* warp_probs = probs + warp * kWarpRows * Layout::kProbStride;
  float* warp_alphas = alphas + warp * kWarpRows;
  const auto k_tile_of = [&](int stage) {
    return reinterpret_cast<__nv_bfloat16*>(kv_region + stage * Layout::kStageBytes);
  };
  const auto v_tile_of = [&](int stage) {
    return reinterpret_cast<__nv_bfloat16*>(kv_region + stage * Layout::kStageBytes +
                                            Layout::kKvTileBytes);
  };

  if (tiles > 0) {
    load_kv_tile_async<D>(keys, values, 0, block_keys, k_tile_of(0), v_tile_of(0));
    copy_async_commit();
  }
  for (int tile = 0; tile < tiles; ++tile) {
    const int stage = tile & 1;
    if (tile + 1 < tiles) {
      load_kv_tile_async<D>(keys, values, (tile + 1) * kBlockKeys, block_keys, k_tile_of(stage ^ 1),
                            v_tile_of(stage ^ 1));
      copy_async_commit();
      copy_async_wait<1>();
    } else {
      copy_async_wait<0>();
    }
    __syncthreads();  // tile `tile` is in shared memory for every thread
    const __nv_bfloat16* k_tile = k_tile_of(stage);
    const __nv_bfloat16* v_tile = v_tile_of(stage);

    // S = Q·Kᵀ for the warp's 16 rows and the tile's keys.
#pragma unroll
    for (int n = 0; n < kKeySteps; ++n) {
      FragAcc s_frag;
      wmma::fill_fragment(s_frag, 0.0f);
#pragma unroll
      for (int k = 0; k < kDimSteps; ++k) {
        FragKt k_frag;
        wmma::load_matrix_sync(k_frag, k_tile + n * 16 * Layout::kTileStride + k * 16,
                               Layout::kTileStride);
        wmma::mma_sync(s_frag, q_frag[k], k_frag, s_frag);
      }
      wmma::store_matrix_sync(warp_scores + n * 16, s_frag, Layout::kScoreStride,
                              wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax: this lane's half row (32 columns); visible columns are j < limit.
    {
      constexpr int kHalf = kBlockKeys / 2;
      const int limit = visible - tile * kBlockKeys - lane_half * kHalf;
      const float* score_row = warp_scores + lane_row * Layout::kScoreStride + lane_half * kHalf;
      __nv_bfloat16* prob_row = warp_probs + lane_row * Layout::kProbStride + lane_half * kHalf;
      float block_max = negative_infinity;
#pragma unroll 8
      for (int j = 0; j < kHalf; ++j) {
        if (j < limit) block_max = fmaxf(block_max, score_row[j]);
      }
      block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 1));
      const bool any_visible = block_max != negative_infinity;  // same for both lanes of a row
      const float new_max = any_visible ? fmaxf(running_max, block_max) : running_max;
      const float max_scaled = any_visible ? __fmul_rn(new_max, args.scale_log2) : 0.0f;
      float alpha = 1.0f;
      if (any_visible && running_max != negative_infinity) {
        alpha = exp2f(__fmaf_rn(running_max, args.scale_log2, -max_scaled));
      } else if (any_visible) {
        alpha = 0.0f;  // first visible tile: the accumulator is still zero
      }
      float block_sum = 0.0f;
#pragma unroll 8
      for (int j = 0; j < kHalf; ++j) {
        float p = 0.0f;
        if (any_visible && j < limit) {
          p = exp2f(__fmaf_rn(score_row[j], args.scale_log2, -max_scaled));
        }
        block_sum = __fadd_rn(block_sum, p);
        prob_row[j] = __float2bfloat16_rn(p);
      }
      block_sum = __fadd_rn(block_sum, __shfl_xor_sync(0xffffffffu, block_sum, 1));
      if (any_visible) {
        running_sum = __fmaf_rn(running_sum, alpha, block_sum);
        running_max = new_max;
      }
      if (lane_half == 0) warp_alphas[lane_row] = alpha;
    }
    __syncwarp();

    // acc = α·acc + P·V.
    float alpha_of[kAccElements];
#pragma unroll
    for (int i = 0; i < kAccElements; ++i) alpha_of[i] = warp_alphas[row_of[i]];
#pragma unroll
    for (int f = 0; f < kDimSteps; ++f) {
#pragma unroll
      for (int i = 0; i < kAccElements; ++i) o_frag[f].x[i] *= alpha_of[i];
    }
    FragA p_frag[kKeySteps];
#pragma unroll
    for (int k = 0; k < kKeySteps; ++k) {
      wmma::load_matrix_sync(p_frag[k], warp_probs + k * 16, Layout::kProbStride);
    }
#pragma unroll
    for (int f = 0; f < kDimSteps; ++f) {
#pragma unroll
      for (int k = 0; k < kKeySteps; ++k) {
        FragV v_frag;
        wmma::load_matrix_sync(v_frag, v_tile + k * 16 * Layout::kTileStride + f * 16,
                               Layout::kTileStride);
        wmma::mma_sync(o_frag[f], p_frag[k], v_frag, o_frag[f]);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled or reused
  }

  // out = [acc / l]: stage the accumulators (over the K/V buffers, free now), then 16-byte stores.
  float* warp_out = out_stage + warp * kWarpRows * Layout::kOutStride;
#pragma unroll
  for (int f = 0; f < kDimSteps; ++f) {
    wmma::store_matrix_sync(warp_out + f * 16, o_frag[f], Layout::kOutStride, wmma::mem_row_major);
  }
  __syncwarp();
  if (row_valid) {
    constexpr int kHalfDim = D / 2;
    const float* acc_row = warp_out + lane_row * Layout::kOutStride + lane_half * kHalfDim;
    __nv_bfloat16* out_row =
        args.out +
        (static_cast<std::size_t>(row0 + block_row) * static_cast<std::size_t>(args.num_heads) +
         static_cast<std::size_t>(head)) *
            D +
        static_cast<std::size_t>(lane_half * kHalfDim);
#pragma unroll
    for (int chunk = 0; chunk < kHalfDim / 8; ++chunk) {
      alignas(16) __nv_bfloat16 packed[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float acc = acc_row[chunk * 8 + e];
        packed[e] = __float2bfloat16_rn(running_sum > 0.0f ? __fdiv_rn(acc, running_sum) : 0.0f);
      }
      *reinterpret_cast<uint4*>(out_row + chunk * 8) = *reinterpret_cast<const uint4*>(packed);
    }
  }
}

template <int D>
void launch_sdpa(const SdpaArgs& args, int row_blocks, cudaStream_t stream) {
  constexpr std::size_t kSharedBytes = SdpaLayout<D>::kTotalBytes;
  static_assert(kSharedBytes <= 227 * 1024, "sdpa tile exceeds the per-block shared-memory limit");
  int device = 0;
  KVAUDIT_CUDA_CHECK(cudaGetDevice(&device));
  int shared_limit = 0;
  KVAUDIT_CUDA_CHECK(
      cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (static_cast<std::size_t>(shared_limit) < kSharedBytes) {
    throw std::invalid_argument("prefill_attention_sdpa: head_dim " + std::to_string(D) +
                                " needs " + std::to_string(kSharedBytes) +
                                " bytes of shared memory per block; the device allows " +
                                std::to_string(shared_limit));
  }
  KVAUDIT_CUDA_CHECK(cudaFuncSetAttribute(sdpa_prefill_kernel<D>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kSharedBytes)));
  const dim3 grid(static_cast<unsigned>(args.num_heads), static_cast<unsigned>(row_blocks));
  sdpa_prefill_kernel<D><<<grid, kThreads, kSharedBytes, stream>>>(args);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void prefill_attention_sdpa(const PrefillAttentionProblem& problem, cudaStream_t stream) {
  validate_prefill_attention(problem, "prefill_attention_sdpa");
  const int dim = problem.head_dim;
  if (dim != 16 && dim != 64 && dim != 128) {
    throw std::invalid_argument(
        "prefill_attention_sdpa: PrefillAttentionProblem.head_dim = " + std::to_string(dim) +
        " is not supported (kernels exist for 16, 64 and 128)");
  }
  const int row_blocks = (problem.rows + kBlockRows - 1) / kBlockRows;
  if (row_blocks > kMaxRowBlocks) {
    throw std::invalid_argument(
        "prefill_attention_sdpa: PrefillAttentionProblem.rows = " + std::to_string(problem.rows) +
        " exceeds " + std::to_string(kMaxRowBlocks * kBlockRows) + " rows per call");
  }
  SdpaArgs args{};
  args.kv = problem.sequence;
  args.layer = problem.layer;
  args.num_heads = problem.num_heads;
  args.group = problem.num_heads / problem.num_kv_heads;
  args.rows = problem.rows;
  args.scale_log2 = problem.scale * std::numbers::log2e_v<float>;  // as cpu::sdpa_attention_task
  args.queries = problem.queries;
  args.query_positions = problem.query_positions;
  args.out = problem.out;
  switch (dim) {
    case 16:
      return launch_sdpa<16>(args, row_blocks, stream);
    case 64:
      return launch_sdpa<64>(args, row_blocks, stream);
    default:
      return launch_sdpa<128>(args, row_blocks, stream);
  }
}

}  // namespace kvaudit::cuda
