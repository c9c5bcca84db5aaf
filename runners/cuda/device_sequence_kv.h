// DeviceSequenceKv: the device-visible descriptor of one sequence's ragged per-head KV cache, the
// layout every CUDA kernel that reads or writes the cache agrees on (the owner is DeviceKvCache,
// device_kv_cache.h). Plain data: it is passed to kernels by value or as a device array (batched
// decode, CUDA graphs), and holds device pointers only.
//
// For layer l, KV head h (LH = l·num_kv_heads + h), the head keeps n = lengths[LH] entries in slots
// 0..n-1, in strictly ascending original position (the CPU KvCache's rule, kv_cache.h):
//   keys      [layers, num_kv_heads, capacity, head_dim] bf16, post-RoPE
//   values    [layers, num_kv_heads, capacity, head_dim] bf16
//   positions [layers, num_kv_heads, capacity] int32 original positions
//   lengths   [layers, num_kv_heads] int32 entries held now (device memory, so kernels and captured
//             CUDA graphs read the current count)
// Appending T tokens at a layer writes slots lengths[LH] .. lengths[LH]+T-1 of every head of that
// layer, then advances lengths (two stream-ordered kernels: kernels.h append_kv / advance_lengths).
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

namespace kvaudit::cuda {

struct DeviceSequenceKv {
  __nv_bfloat16* keys = nullptr;
  __nv_bfloat16* values = nullptr;
  std::int32_t* positions = nullptr;
  std::int32_t* lengths = nullptr;
  int num_kv_heads = 0;
  int head_dim = 0;
  int capacity = 0;  // slots per (layer, head)

#ifdef __CUDACC__
  __host__ __device__
#endif
      std::size_t
      head_index(int layer, int kv_head) const {
    return static_cast<std::size_t>(layer) * static_cast<std::size_t>(num_kv_heads) +
           static_cast<std::size_t>(kv_head);
  }
  // Offset (in elements) of slot 0 of (layer, kv_head) in keys/values.
#ifdef __CUDACC__
  __host__ __device__
#endif
      std::size_t
      row_offset(int layer, int kv_head) const {
    return head_index(layer, kv_head) * static_cast<std::size_t>(capacity) *
           static_cast<std::size_t>(head_dim);
  }
  // Offset (in elements) of slot 0 of (layer, kv_head) in positions.
#ifdef __CUDACC__
  __host__ __device__
#endif
      std::size_t
      position_offset(int layer, int kv_head) const {
    return head_index(layer, kv_head) * static_cast<std::size_t>(capacity);
  }
};

// Attention numerics of the two backends (cpu/attention.h states them; the CUDA kernels mirror
// them):
//   eager  s = [q·k], [s·scale], p = [softmax_fp32(s)], out = [Σ p·v]     ([] = bf16 rounding)
//   sdpa   FlashAttention-2: fp32 s never rounded, online softmax, [p] before P·V, fp32
//          accumulation, out = [acc / l]
enum class AttentionNumerics { eager, sdpa };

}  // namespace kvaudit::cuda
