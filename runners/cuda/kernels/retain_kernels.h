// Compaction of a ragged device cache after eviction (GPU twin of cpu::KvCache::retain): for every
// (layer, KV head) LH the head keeps the entries at slots keep_slots[keep_offsets[LH] ..
// keep_offsets[LH+1]) (ascending slot indices), moved to slots 0..count-1; lengths[LH] = count.
// Uses `scratch` (≥ keep_offsets[L·Hkv] · d elements each for keys and values) to gather first, so
// the move is safe in place.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runners/cuda/device_sequence_kv.h"

namespace kvaudit::cuda {

void compact_kv_cache(DeviceSequenceKv sequence, int num_layers, const std::int32_t* keep_offsets,
                      const std::int32_t* keep_slots, std::int64_t total_kept,
                      __nv_bfloat16* scratch_keys, __nv_bfloat16* scratch_values,
                      std::int32_t* scratch_positions, cudaStream_t stream);

}  // namespace kvaudit::cuda
