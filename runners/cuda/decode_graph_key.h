// The key of CudaModel's decode-graph cache: what a captured decode step bakes in about its batch.
// A graph is captured once per batch composition and replayed; the sequences' descriptors are
// uploaded once into the graph's own buffer, so every field of every descriptor (the keys, values,
// positions and lengths pointers and the layout) must match for a replay to be valid. Keying on a
// subset is a defect: after a cache is freed, the allocator can hand the same keys and lengths
// addresses to a new cache whose values or positions lie elsewhere, and the replay would read the
// freed buffers (wrong attention or an illegal address). Host code only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runners/cuda/device_sequence_kv.h"

namespace kvaudit::cuda {

using DecodeGraphKey = std::vector<std::uintptr_t>;

inline DecodeGraphKey decode_graph_key(std::span<const DeviceSequenceKv> batch) {
  DecodeGraphKey key;
  key.reserve(batch.size() * 7);
  for (const DeviceSequenceKv& d : batch) {
    key.push_back(reinterpret_cast<std::uintptr_t>(d.keys));
    key.push_back(reinterpret_cast<std::uintptr_t>(d.values));
    key.push_back(reinterpret_cast<std::uintptr_t>(d.positions));
    key.push_back(reinterpret_cast<std::uintptr_t>(d.lengths));
    key.push_back(static_cast<std::uint32_t>(d.num_kv_heads));
    key.push_back(static_cast<std::uint32_t>(d.head_dim));
    key.push_back(static_cast<std::uint32_t>(d.capacity));
  }
  return key;
}

}  // namespace kvaudit::cuda
