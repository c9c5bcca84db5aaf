// compact_kv_cache (retain_kernels.h), the GPU twin of cpu::KvCache::retain
// (runners/cpu/kv_cache.cpp) for every (layer, KV head) LH at once: the head keeps the entries at
// slots keep_slots[keep_offsets[LH] .. keep_offsets[LH+1]) (strictly ascending), which move to
// slots 0..count−1 in that order; lengths[LH] = count. Exact copies (keys, values, positions). Two
// stream-ordered kernels make the in-place move safe: gather every kept entry into the scratch
// arrays (entry i of the flat keep list at scratch row i), then copy each head's rows back to the
// front of its slots and set its length. One block per LH in both; threads across entries × d.
// Device-side checks (trap): offsets ascending within [0, total_kept], slots strictly ascending and
// below the head's current length.
#include <cstdint>
#include <string>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/kernels/kernel_checks.h"
#include "runners/cuda/kernels/retain_kernels.h"

namespace kvaudit::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void gather_kept_entries_kernel(DeviceSequenceKv sequence,
                                           const std::int32_t* keep_offsets,
                                           const std::int32_t* keep_slots, std::int64_t total_kept,
                                           __nv_bfloat16* scratch_keys,
                                           __nv_bfloat16* scratch_values,
                                           std::int32_t* scratch_positions) {
  const int head_index = static_cast<int>(blockIdx.x);  // LH = layer·Hkv + h
  const int layer = head_index / sequence.num_kv_heads;
  const int kv_head = head_index % sequence.num_kv_heads;
  const std::int64_t begin = keep_offsets[head_index];
  const std::int64_t end = keep_offsets[head_index + 1];
  KVAUDIT_DEVICE_REQUIRE(begin >= 0 && begin <= end && end <= total_kept,
                         "compact_kv_cache: keep_offsets must ascend within [0, total_kept]");
  const std::int64_t count = end - begin;
  const std::int32_t length = sequence.lengths[sequence.head_index(layer, kv_head)];
  for (std::int64_t i = threadIdx.x; i < count; i += kThreads) {
    const std::int32_t slot = keep_slots[begin + i];
    const bool ascending = i == 0 || keep_slots[begin + i - 1] < slot;
    KVAUDIT_DEVICE_REQUIRE(slot >= 0 && slot < length && ascending,
                           "compact_kv_cache: keep slots must be strictly ascending and below the "
                           "head's length");
    scratch_positions[begin + i] =
        sequence
            .positions[static_cast<std::int64_t>(sequence.position_offset(layer, kv_head)) + slot];
  }
  const std::int64_t d = sequence.head_dim;
  const std::int64_t head_offset = static_cast<std::int64_t>(sequence.row_offset(layer, kv_head));
  for (std::int64_t k = threadIdx.x; k < count * d; k += kThreads) {
    const std::int64_t i = k / d;
    const std::int64_t e = k - i * d;
    const std::int64_t slot = keep_slots[begin + i];
    if (slot < 0 || slot >= length) continue;  // reported (trap) by the loop above
    scratch_keys[(begin + i) * d + e] = sequence.keys[head_offset + slot * d + e];
    scratch_values[(begin + i) * d + e] = sequence.values[head_offset + slot * d + e];
  }
}

__global__ void write_back_kept_entries_kernel(DeviceSequenceKv sequence,
                                               const std::int32_t* keep_offsets,
                                               const __nv_bfloat16* scratch_keys,
                                               const __nv_bfloat16* scratch_values,
                                               const std::int32_t* scratch_positions) {
  const int head_index = static_cast<int>(blockIdx.x);
  const int layer = head_index / sequence.num_kv_heads;
  const int kv_head = head_index % sequence.num_kv_heads;
  const std::int64_t begin = keep_offsets[head_index];
  const std::int64_t count = keep_offsets[head_index + 1] - begin;  // checked by the gather
  const std::int64_t d = sequence.head_dim;
  const std::int64_t head_offset = static_cast<std::int64_t>(sequence.row_offset(layer, kv_head));
  const std::int64_t position_offset =
      static_cast<std::int64_t>(sequence.position_offset(layer, kv_head));
  for (std::int64_t i = threadIdx.x; i < count; i += kThreads) {
    sequence.positions[position_offset + i] = scratch_positions[begin + i];
  }
  for (std::int64_t k = threadIdx.x; k < count * d; k += kThreads) {
    sequence.keys[head_offset + k] = scratch_keys[begin * d + k];
    sequence.values[head_offset + k] = scratch_values[begin * d + k];
  }
  if (threadIdx.x == 0) {
    sequence.lengths[sequence.head_index(layer, kv_head)] = static_cast<std::int32_t>(count);
  }
}

}  // namespace

void compact_kv_cache(DeviceSequenceKv sequence, int num_layers, const std::int32_t* keep_offsets,
                      const std::int32_t* keep_slots, std::int64_t total_kept,
                      __nv_bfloat16* scratch_keys, __nv_bfloat16* scratch_values,
                      std::int32_t* scratch_positions, cudaStream_t stream) {
  using kernel_checks::require;
  constexpr const char* kName = "compact_kv_cache";
  require(num_layers > 0, kName, "num_layers must be positive, got " + std::to_string(num_layers));
  require(sequence.num_kv_heads > 0 && sequence.head_dim > 0 && sequence.capacity >= 0, kName,
          "the cache descriptor needs positive num_kv_heads and head_dim, got " +
              std::to_string(sequence.num_kv_heads) + " and " + std::to_string(sequence.head_dim));
  require(sequence.keys != nullptr && sequence.values != nullptr && sequence.positions != nullptr &&
              sequence.lengths != nullptr,
          kName, "the cache descriptor holds a null device pointer");
  const std::int64_t heads = static_cast<std::int64_t>(num_layers) * sequence.num_kv_heads;
  require(heads <= INT32_MAX, kName, "num_layers · num_kv_heads is too large");
  require(
      total_kept >= 0 && total_kept <= heads * static_cast<std::int64_t>(sequence.capacity), kName,
      "total_kept must be in [0, layers · kv heads · capacity], got " + std::to_string(total_kept));
  require(keep_offsets != nullptr, kName, "keep_offsets must be a device pointer, got null");
  require(total_kept == 0 || (keep_slots != nullptr && scratch_keys != nullptr &&
                              scratch_values != nullptr && scratch_positions != nullptr),
          kName, "keep_slots and the scratch arrays must be device pointers, got a null pointer");
  const unsigned int blocks = static_cast<unsigned int>(heads);
  gather_kept_entries_kernel<<<blocks, kThreads, 0, stream>>>(sequence, keep_offsets, keep_slots,
                                                              total_kept, scratch_keys,
                                                              scratch_values, scratch_positions);
  KVAUDIT_CUDA_CHECK_LAUNCH();
  write_back_kept_entries_kernel<<<blocks, kThreads, 0, stream>>>(
      sequence, keep_offsets, scratch_keys, scratch_values, scratch_positions);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace kvaudit::cuda
