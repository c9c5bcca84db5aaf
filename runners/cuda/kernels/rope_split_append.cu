// rope_split_append (kernels.h): splits the fused QKV projection, applies RoPE to q and k and
// appends k and v to the ragged device cache (layout: device_sequence_kv.h).
// RoPE is the twin of cpu::apply_rope (runners/cpu/rope.cpp) in Rounding::bf16, rotate-half layout,
// with half = d/2 and c, s the bf16-rounded cos/sin rows of the token's position:
//   out[i]        = [ [x[i]·c[i]]             + [(−x[i+half])·s[i]] ]
//   out[i + half] = [ [x[i+half]·c[i+half]]   + [x[i]·s[i+half]]    ]
// four rounded products and two rounded sums ([] = bf16 round-to-nearest-even, fp32 products and
// sums without contraction), so the result matches the CPU bit for bit.
// Cache append: row r of sequence row_sequence[r] goes to slot lengths[layer, h] + row_offset[r] of
// every KV head h (keys post-RoPE, values as they are, positions[r] as its original position);
// the lengths are advanced afterwards by advance_lengths (a separate, stream-ordered kernel).
// Grid: (row, head) with head ∈ [0, H) query heads, [H, H+Hkv) key heads, [H+Hkv, H+2Hkv) value
// heads; threads across the head dimension.
#include <cstdint>
#include <string>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/kernels/device_bf16.cuh"
#include "runners/cuda/kernels/kernel_checks.h"
#include "runners/cuda/kernels/kernels.h"

namespace kvaudit::cuda {
namespace {

constexpr int kThreads = 64;

// Rotates one head vector `source` [d] into `target` [d] (they may not overlap partially; the
// same thread reads x[i], x[i+half] before writing them, so target == source is fine).
__device__ void rotate_head(const __nv_bfloat16* source, const float* cos_row, const float* sin_row,
                            int head_dim, __nv_bfloat16* target) {
  using device_bf16::round_bf16;
  using device_bf16::to_float;
  const int half = head_dim / 2;
  for (int i = static_cast<int>(threadIdx.x); i < half; i += kThreads) {
    const float first = to_float(source[i]);
    const float second = to_float(source[i + half]);
    const float a = round_bf16(__fmul_rn(first, cos_row[i]));
    const float b = round_bf16(__fmul_rn(-second, sin_row[i]));
    const float e = round_bf16(__fmul_rn(second, cos_row[i + half]));
    const float f = round_bf16(__fmul_rn(first, sin_row[i + half]));
    target[i] = __float2bfloat16_rn(__fadd_rn(a, b));
    target[i + half] = __float2bfloat16_rn(__fadd_rn(e, f));
  }
}

__global__ void rope_split_append_kernel(const __nv_bfloat16* qkv, int num_heads, int num_kv_heads,
                                         int head_dim, const float* cos_table,
                                         const float* sin_table, const std::int32_t* positions,
                                         const std::int32_t* row_sequence,
                                         const std::int32_t* row_offset,
                                         const DeviceSequenceKv* sequences, int layer,
                                         __nv_bfloat16* q_out, __nv_bfloat16* q_pre_rope) {
  const std::int64_t row = blockIdx.x;
  const int head = static_cast<int>(blockIdx.y);
  const std::int64_t d = head_dim;
  const std::int64_t row_width = static_cast<std::int64_t>(num_heads + 2 * num_kv_heads) * d;
  const __nv_bfloat16* source = qkv + row * row_width + head * d;
  const std::int32_t position = positions[row];
  KVAUDIT_DEVICE_REQUIRE(position >= 0, "rope_split_append: negative position");
  const float* cos_row = cos_table + static_cast<std::int64_t>(position) * d;
  const float* sin_row = sin_table + static_cast<std::int64_t>(position) * d;

  if (head < num_heads) {  // query head: RoPE into q_out, optional pre-RoPE copy
    const std::int64_t target_offset = (row * num_heads + head) * d;
    if (q_pre_rope != nullptr) {
      for (int i = static_cast<int>(threadIdx.x); i < head_dim; i += kThreads) {
        q_pre_rope[target_offset + i] = source[i];
      }
    }
    rotate_head(source, cos_row, sin_row, head_dim, q_out + target_offset);
    return;
  }

  const bool is_key = head < num_heads + num_kv_heads;
  const int kv_head = is_key ? head - num_heads : head - num_heads - num_kv_heads;
  const DeviceSequenceKv sequence = sequences[row_sequence[row]];
  KVAUDIT_DEVICE_REQUIRE(sequence.head_dim == head_dim && sequence.num_kv_heads == num_kv_heads,
                         "rope_split_append: the cache descriptor's head_dim / num_kv_heads differ "
                         "from the arguments");
  const std::int64_t slot =
      static_cast<std::int64_t>(sequence.lengths[sequence.head_index(layer, kv_head)]) +
      row_offset[row];
  KVAUDIT_DEVICE_REQUIRE(slot >= 0 && slot < sequence.capacity,
                         "rope_split_append: the slot is outside the cache's capacity");
  const std::int64_t cache_offset =
      static_cast<std::int64_t>(sequence.row_offset(layer, kv_head)) + slot * d;
  if (is_key) {
    rotate_head(source, cos_row, sin_row, head_dim, sequence.keys + cache_offset);
    if (threadIdx.x == 0) {
      sequence
          .positions[static_cast<std::int64_t>(sequence.position_offset(layer, kv_head)) + slot] =
          position;
    }
  } else {
    __nv_bfloat16* target = sequence.values + cache_offset;
    for (int i = static_cast<int>(threadIdx.x); i < head_dim; i += kThreads) target[i] = source[i];
  }
}

}  // namespace

void rope_split_append(const __nv_bfloat16* qkv, int rows, int num_heads, int num_kv_heads,
                       int head_dim, const float* cos_table, const float* sin_table,
                       const std::int32_t* positions, const std::int32_t* row_sequence,
                       const std::int32_t* row_offset, const DeviceSequenceKv* sequences, int layer,
                       __nv_bfloat16* q_out, __nv_bfloat16* q_pre_rope, cudaStream_t stream) {
  using kernel_checks::require;
  constexpr const char* kName = "rope_split_append";
  require(rows >= 0, kName, "rows must be non-negative, got " + std::to_string(rows));
  require(num_heads > 0 && num_kv_heads > 0, kName,
          "num_heads and num_kv_heads must be positive, got " + std::to_string(num_heads) +
              " and " + std::to_string(num_kv_heads));
  require(head_dim > 0 && head_dim % 2 == 0, kName,
          "head_dim must be positive and even, got " + std::to_string(head_dim));
  require(num_heads + 2 * num_kv_heads <= 65535, kName,
          "num_heads + 2·num_kv_heads must be at most 65535 (grid y), got " +
              std::to_string(num_heads + 2 * num_kv_heads));
  require(layer >= 0, kName, "layer must be non-negative, got " + std::to_string(layer));
  if (rows == 0) return;
  require(qkv != nullptr && cos_table != nullptr && sin_table != nullptr && positions != nullptr &&
              row_sequence != nullptr && row_offset != nullptr && sequences != nullptr &&
              q_out != nullptr,
          kName, "every array except q_pre_rope must be a device pointer, got a null pointer");
  const dim3 grid(static_cast<unsigned int>(rows),
                  static_cast<unsigned int>(num_heads + 2 * num_kv_heads));
  rope_split_append_kernel<<<grid, kThreads, 0, stream>>>(
      qkv, num_heads, num_kv_heads, head_dim, cos_table, sin_table, positions, row_sequence,
      row_offset, sequences, layer, q_out, q_pre_rope);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace kvaudit::cuda
