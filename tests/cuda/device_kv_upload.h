// Test helper: copies a CPU KvCache (runners/cpu/kv_cache.h) into device buffers laid out as
// runners/cuda/device_sequence_kv.h describes, so GPU attention can be compared with the CPU twin
// on the very same (possibly ragged) cache. Slots past each head's length are filled with bf16 NaN
// (keys, values) and position −1, so a kernel that reads beyond a head's entries spoils its output
// and fails the comparison instead of passing by luck.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runners/cpu/kv_cache.h"
#include "runners/cuda/device_buffer.h"
#include "runners/cuda/device_sequence_kv.h"

namespace kvaudit::cuda::test {

struct DeviceKvCopy {
  DeviceBuffer<bf16> keys;                 // [layers, Hkv, capacity, d]
  DeviceBuffer<bf16> values;               // [layers, Hkv, capacity, d]
  DeviceBuffer<std::int32_t> positions;    // [layers, Hkv, capacity]
  DeviceBuffer<std::int32_t> lengths;      // [layers, Hkv]
  std::vector<std::int32_t> host_lengths;  // [layers, Hkv]
  DeviceSequenceKv descriptor;

  // Host copy of lengths[layer, ·].
  std::span<const std::int32_t> layer_lengths(int layer) const;
};

// capacity must be ≥ every head's kept count (throws std::invalid_argument otherwise). Key and
// value values must be bf16-representable (they are converted exactly).
DeviceKvCopy upload_kv_cache(const cpu::KvCache& cache, int capacity);

}  // namespace kvaudit::cuda::test
