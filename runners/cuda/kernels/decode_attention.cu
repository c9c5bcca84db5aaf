// decode_attention (kernels.h): one query row per sequence over its whole ragged cache at `layer`
// (layout: device_sequence_kv.h), both numerics. CPU twins: cpu::attention_eager and
// cpu::attention_sdpa (runners/cpu/attention_eager.cpp, attention_sdpa.cpp, attention_math.cpp) on
// a one-row problem in Rounding::bf16. With n = lengths[layer, kv_head] keys k_j, values v_j:
//   s_j   = Σ_e q[e]·k_j[e]  in fp32, e in increasing order (as the CPU's score_tile; products of
//           bf16 values are exact in fp32, so the scores match the CPU bit for bit)
//   eager s'_j = [[s_j]·scale];  m = max_j s'_j;  l = Σ_j exp(s'_j − m)
//         p_j = [exp(s'_j − m) / l];  out = [Σ_j p_j·v_j]
//   sdpa  m = max_j s_j;  c = scale·log2 e;  p_j = exp2(s_j·c − m·c) (one fused multiply-add, as
//         FlashAttention-2 and the CPU's FMA build compute it);  l = Σ_j p_j (fp32 p)
//         out = [(Σ_j [p_j]·v_j) / l]        ([] = bf16 round-to-nearest-even)
// sdpa is the CPU's online softmax with one key block (m is then the global max); for eager, l is
// gathered per thread as an online sum and combined as Σ_t l_t·exp(m_t − m). Sums over keys run
// in a different order than on the CPU (fp32 rounding only), exp/exp2 are CUDA's precise expf /
// exp2f (≤ 2 ulp) where the CPU uses its vector polynomials (~1 ulp): the bf16 outputs agree to
// within an ulp or two (tests/cuda/kernels measure it).
//
// Design: one thread block per (sequence, KV head, group of up to 8 of its query heads); keys are
// read once per group. Pass 1: each thread scores keys j ≡ tid (mod 256), reading the key row with
// 16-byte loads, and keeps per head a running max (and for eager a running sum); a block reduction
// gives m (and l). Pass 2: keys in tiles of 256: each thread rescores its key and writes [p] into
// shared memory; then the tile's value rows are read coalesced (d/8 threads per row, 16 bytes each)
// and accumulated in registers; finally the partial sums of the key lanes are reduced in a fixed
// order (deterministic). The length is read from device memory, so the launch does not depend on
// host-side lengths (CUDA-graph safe). Template on the head dimension d ∈ {16, 32, 64, 128, 256}.
#include <cmath>
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
constexpr int kMaxHeads = 8;                       // query heads per block
constexpr float kLog2e = 1.44269504088896340736f;  // std::numbers::log2e_v<float>
constexpr unsigned int kFullMask = 0xffffffffu;

// s_h = Σ_e q_h[e]·k[e] for h < heads, e in increasing order, products and sums rounded separately.
template <int D>
__device__ __forceinline__ void score_key(const __nv_bfloat16* key_row, const float (*queries)[D],
                                          int heads, float (&scores)[kMaxHeads]) {
  const uint4* row = reinterpret_cast<const uint4*>(key_row);
#pragma unroll
  for (int h = 0; h < kMaxHeads; ++h) scores[h] = 0.0f;
#pragma unroll 2
  for (int c = 0; c < D / 8; ++c) {
    float key[8];
    device_bf16::unpack8(row[c], key);
#pragma unroll
    for (int h = 0; h < kMaxHeads; ++h) {
      if (h < heads) {
        const float4 low = *reinterpret_cast<const float4*>(&queries[h][c * 8]);
        const float4 high = *reinterpret_cast<const float4*>(&queries[h][c * 8 + 4]);
        float s = scores[h];
        s = __fadd_rn(s, __fmul_rn(low.x, key[0]));
        s = __fadd_rn(s, __fmul_rn(low.y, key[1]));
        s = __fadd_rn(s, __fmul_rn(low.z, key[2]));
        s = __fadd_rn(s, __fmul_rn(low.w, key[3]));
        s = __fadd_rn(s, __fmul_rn(high.x, key[4]));
        s = __fadd_rn(s, __fmul_rn(high.y, key[5]));
        s = __fadd_rn(s, __fmul_rn(high.z, key[6]));
        s = __fadd_rn(s, __fmul_rn(high.w, key[7]));
        scores[h] = s;
      }
    }
  }
}

// eager's score: [[s]·scale] (HF: matmul output in bf16, then `* scaling` in bf16).
__device__ __forceinline__ float eager_score(float raw, float scale) {
  return device_bf16::round_bf16(__fmul_rn(device_bf16::round_bf16(raw), scale));
}

__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, value, offset);
    value = other > value ? other : value;
  }
  return value;
}

// Sum over the warp in a fixed tree; the result is lane 0's.
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    value = __fadd_rn(value, __shfl_down_sync(kFullMask, value, offset));
  }
  return value;
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    decode_attention_kernel(const DeviceSequenceKv* sequences, int layer, int num_heads,
                            int num_kv_heads, float scale, bool eager, const __nv_bfloat16* queries,
                            __nv_bfloat16* out) {
  static_assert(D % 8 == 0 && kThreads % (D / 8) == 0 && D <= kThreads, "unsupported head_dim");
  constexpr int kChunks = D / 8;                 // 16-byte chunks per K/V row
  constexpr int kKeyLanes = kThreads / kChunks;  // value rows read at once in pass 2
  using device_bf16::round_bf16;

  __shared__ __align__(16) float query_shared[kMaxHeads][D];
  __shared__ float weight_shared[kMaxHeads][kThreads];
  __shared__ float partial_shared[kKeyLanes][D];
  __shared__ float warp_shared[kMaxHeads][kWarps];
  __shared__ float max_shared[kMaxHeads];
  __shared__ float sum_shared[kMaxHeads];

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int sequence_index = static_cast<int>(blockIdx.x);
  const int kv_head = static_cast<int>(blockIdx.y);
  const int group = num_heads / num_kv_heads;
  const int first_in_group = static_cast<int>(blockIdx.z) * kMaxHeads;
  const int heads = min(kMaxHeads, group - first_in_group);
  const int first_head = kv_head * group + first_in_group;

  const DeviceSequenceKv sequence = sequences[sequence_index];
  KVAUDIT_DEVICE_REQUIRE(sequence.head_dim == D && sequence.num_kv_heads == num_kv_heads,
                         "decode_attention: the cache descriptor's head_dim / num_kv_heads differ "
                         "from the arguments");
  KVAUDIT_DEVICE_REQUIRE((reinterpret_cast<std::uintptr_t>(sequence.keys) |
                          reinterpret_cast<std::uintptr_t>(sequence.values)) %
                                 16 ==
                             0,
                         "decode_attention: keys and values must be 16-byte aligned");
  const int n = sequence.lengths[sequence.head_index(layer, kv_head)];
  KVAUDIT_DEVICE_REQUIRE(n >= 0 && n <= sequence.capacity,
                         "decode_attention: the head's length is outside [0, capacity]");
  const __nv_bfloat16* keys = sequence.keys + sequence.row_offset(layer, kv_head);
  const __nv_bfloat16* values = sequence.values + sequence.row_offset(layer, kv_head);

  const __nv_bfloat16* query_rows =
      queries + (static_cast<std::int64_t>(sequence_index) * num_heads + first_head) * D;
  for (int i = tid; i < kMaxHeads * D; i += kThreads) {
    const int h = i / D;
    const int e = i % D;
    query_shared[h][e] = h < heads ? device_bf16::to_float(query_rows[h * D + e]) : 0.0f;
  }
  __syncthreads();

  // ---- pass 1: m (and eager's l) ----
  float running_max[kMaxHeads];
  float running_sum[kMaxHeads];
#pragma unroll
  for (int h = 0; h < kMaxHeads; ++h) {
    running_max[h] = -INFINITY;
    running_sum[h] = 0.0f;
  }
  for (int j = tid; j < n; j += kThreads) {
    float s[kMaxHeads];
    score_key<D>(keys + static_cast<std::int64_t>(j) * D, query_shared, heads, s);
#pragma unroll
    for (int h = 0; h < kMaxHeads; ++h) {
      if (h >= heads) continue;
      if (eager) {
        const float score = eager_score(s[h], scale);
        if (score > running_max[h]) {
          running_sum[h] =
              __fadd_rn(__fmul_rn(running_sum[h], expf(__fsub_rn(running_max[h], score))), 1.0f);
          running_max[h] = score;
        } else {
          running_sum[h] = __fadd_rn(running_sum[h], expf(__fsub_rn(score, running_max[h])));
        }
      } else {
        running_max[h] = s[h] > running_max[h] ? s[h] : running_max[h];
      }
    }
  }
#pragma unroll
  for (int h = 0; h < kMaxHeads; ++h) {
    const float m = warp_max(running_max[h]);
    if (lane == 0) warp_shared[h][warp] = m;
  }
  __syncthreads();
  if (tid < kMaxHeads) {
    float m = -INFINITY;
    for (int w = 0; w < kWarps; ++w) m = warp_shared[tid][w] > m ? warp_shared[tid][w] : m;
    max_shared[tid] = m;
  }
  __syncthreads();
  if (eager) {
#pragma unroll
    for (int h = 0; h < kMaxHeads; ++h) {
      const float part =
          running_max[h] == -INFINITY
              ? 0.0f
              : __fmul_rn(running_sum[h], expf(__fsub_rn(running_max[h], max_shared[h])));
      const float total = warp_sum(part);
      if (lane == 0) warp_shared[h][warp] = total;
    }
    __syncthreads();
    if (tid < kMaxHeads) {
      float total = 0.0f;
      for (int w = 0; w < kWarps; ++w) total = __fadd_rn(total, warp_shared[tid][w]);
      sum_shared[tid] = total;
    }
    __syncthreads();
  }

  // ---- pass 2: p and P·V ----
  float row_max[kMaxHeads];
  float row_sum[kMaxHeads];
  float max_scaled[kMaxHeads];
  float p_sum[kMaxHeads];  // sdpa: this thread's part of l
  float accumulators[kMaxHeads][8];
  const float scale_log2 = __fmul_rn(scale, kLog2e);
#pragma unroll
  for (int h = 0; h < kMaxHeads; ++h) {
    row_max[h] = max_shared[h];
    row_sum[h] = eager ? sum_shared[h] : 0.0f;
    max_scaled[h] = __fmul_rn(row_max[h], scale_log2);
    p_sum[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) accumulators[h][i] = 0.0f;
  }
  const int chunk = tid % kChunks;
  const int key_lane = tid / kChunks;
  for (int tile = 0; tile < n; tile += kThreads) {
    const int j = tile + tid;
    float weights[kMaxHeads];
#pragma unroll
    for (int h = 0; h < kMaxHeads; ++h) weights[h] = 0.0f;
    if (j < n) {
      float s[kMaxHeads];
      score_key<D>(keys + static_cast<std::int64_t>(j) * D, query_shared, heads, s);
#pragma unroll
      for (int h = 0; h < kMaxHeads; ++h) {
        if (h >= heads) continue;
        if (eager) {
          const float e = expf(__fsub_rn(eager_score(s[h], scale), row_max[h]));
          weights[h] = round_bf16(__fdiv_rn(e, row_sum[h]));
        } else {
          const float p = exp2f(__fmaf_rn(s[h], scale_log2, -max_scaled[h]));
          p_sum[h] = __fadd_rn(p_sum[h], p);
          weights[h] = round_bf16(p);
        }
      }
    }
#pragma unroll
    for (int h = 0; h < kMaxHeads; ++h) weight_shared[h][tid] = weights[h];
    __syncthreads();
    const int tile_keys = min(kThreads, n - tile);
    for (int k = key_lane; k < tile_keys; k += kKeyLanes) {
      const uint4 raw =
          reinterpret_cast<const uint4*>(values + static_cast<std::int64_t>(tile + k) * D)[chunk];
      float v[8];
      device_bf16::unpack8(raw, v);
#pragma unroll
      for (int h = 0; h < kMaxHeads; ++h) {
        if (h >= heads) continue;
        const float w = weight_shared[h][k];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          accumulators[h][i] = __fadd_rn(accumulators[h][i], __fmul_rn(w, v[i]));
        }
      }
    }
    __syncthreads();
  }
  if (!eager) {
#pragma unroll
    for (int h = 0; h < kMaxHeads; ++h) {
      const float total = warp_sum(p_sum[h]);
      if (lane == 0) warp_shared[h][warp] = total;
    }
    __syncthreads();
    if (tid < kMaxHeads) {
      float total = 0.0f;
      for (int w = 0; w < kWarps; ++w) total = __fadd_rn(total, warp_shared[tid][w]);
      sum_shared[tid] = total;
    }
    __syncthreads();
  }

  // ---- reduce the key lanes' partial sums (fixed order) and write [out] ----
  __nv_bfloat16* out_rows =
      out + (static_cast<std::int64_t>(sequence_index) * num_heads + first_head) * D;
#pragma unroll
  for (int h = 0; h < kMaxHeads; ++h) {
    if (h >= heads) break;  // uniform over the block: the barriers below stay matched
#pragma unroll
    for (int i = 0; i < 8; ++i) partial_shared[key_lane][chunk * 8 + i] = accumulators[h][i];
    __syncthreads();
    if (tid < D) {
      float total = 0.0f;
      for (int lane_index = 0; lane_index < kKeyLanes; ++lane_index) {
        total = __fadd_rn(total, partial_shared[lane_index][tid]);
      }
      float value = total;
      if (!eager) value = sum_shared[h] > 0.0f ? __fdiv_rn(total, sum_shared[h]) : 0.0f;
      out_rows[h * D + tid] = __float2bfloat16_rn(value);
    }
    __syncthreads();
  }
}

template <int D>
void launch_decode_attention(dim3 grid, cudaStream_t stream, const DeviceSequenceKv* sequences,
                             int layer, int num_heads, int num_kv_heads, float scale, bool eager,
                             const __nv_bfloat16* queries, __nv_bfloat16* out) {
  decode_attention_kernel<D><<<grid, kThreads, 0, stream>>>(
      sequences, layer, num_heads, num_kv_heads, scale, eager, queries, out);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void decode_attention(const DeviceSequenceKv* sequences, int batch, int layer, int num_heads,
                      int num_kv_heads, int head_dim, float scale, AttentionNumerics numerics,
                      const __nv_bfloat16* queries, __nv_bfloat16* out, cudaStream_t stream) {
  using kernel_checks::require;
  constexpr const char* kName = "decode_attention";
  require(batch >= 0, kName, "batch must be non-negative, got " + std::to_string(batch));
  require(layer >= 0, kName, "layer must be non-negative, got " + std::to_string(layer));
  require(num_heads > 0 && num_kv_heads > 0 && num_heads % num_kv_heads == 0, kName,
          "num_heads must be a positive multiple of num_kv_heads, got " +
              std::to_string(num_heads) + " and " + std::to_string(num_kv_heads));
  require(num_kv_heads <= 65535, kName,
          "num_kv_heads must be at most 65535 (grid y), got " + std::to_string(num_kv_heads));
  require(head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256,
          kName, "head_dim must be 16, 32, 64, 128 or 256, got " + std::to_string(head_dim));
  require(std::isfinite(scale) && scale > 0.0f, kName,
          "scale must be positive and finite, got " + std::to_string(scale));
  require(numerics == AttentionNumerics::eager || numerics == AttentionNumerics::sdpa, kName,
          "numerics must be eager or sdpa");
  if (batch == 0) return;
  require(sequences != nullptr && queries != nullptr && out != nullptr, kName,
          "sequences, queries and out must be device pointers, got a null pointer");
  const int group = num_heads / num_kv_heads;
  const dim3 grid(static_cast<unsigned int>(batch), static_cast<unsigned int>(num_kv_heads),
                  static_cast<unsigned int>((group + kMaxHeads - 1) / kMaxHeads));
  const bool eager = numerics == AttentionNumerics::eager;
  switch (head_dim) {
    case 16:
      return launch_decode_attention<16>(grid, stream, sequences, layer, num_heads, num_kv_heads,
                                         scale, eager, queries, out);
    case 32:
      return launch_decode_attention<32>(grid, stream, sequences, layer, num_heads, num_kv_heads,
                                         scale, eager, queries, out);
    case 64:
      return launch_decode_attention<64>(grid, stream, sequences, layer, num_heads, num_kv_heads,
                                         scale, eager, queries, out);
    case 128:
      return launch_decode_attention<128>(grid, stream, sequences, layer, num_heads, num_kv_heads,
                                          scale, eager, queries, out);
    default:
      return launch_decode_attention<256>(grid, stream, sequences, layer, num_heads, num_kv_heads,
                                          scale, eager, queries, out);
  }
}

}  // namespace kvaudit::cuda
