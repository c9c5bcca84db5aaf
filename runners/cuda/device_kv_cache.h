// DeviceKvCache: owns one sequence's ragged per-head KV cache in GPU memory (layout:
// device_sequence_kv.h) and mirrors its bookkeeping on the host: entries per (layer, KV head) and
// the original length (= RoPE position of the next token; kept after eviction, as the CPU KvCache).
// The GPU twin of cpu::KvCache (runners/cpu/kv_cache.h): same rules for retain and truncate. It is
// the CUDA backend's unit::SequenceCache (runners/unit/inference_engine.h).
//
// Capacity is fixed at construction (slots per head); appending beyond it throws before any kernel
// runs. Memory: 2 · layers · Hkv · capacity · d · 2 B (K and V, bf16) + 4 B per slot for positions.
//
// Streams: every operation of the cache (zeroing, retain's compaction, clone's copies, the lengths
// upload, downloads) is ordered on the stream given at construction, the model's stream that
// appends to it (CudaModel::new_sequence), never on the legacy default stream: the cache stays
// correct if that stream is non-blocking or the build uses per-thread default streams.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runners/cuda/device_buffer.h"
#include "runners/cuda/device_sequence_kv.h"
#include "runners/unit/inference_engine.h"

namespace kvaudit::cuda {

class DeviceKvCache final : public unit::SequenceCache {
 public:
  // `stream`: the stream the model appends on (nullptr: the legacy default stream, for tests and
  // benchmarks that run everything there).
  DeviceKvCache(int num_layers, int num_kv_heads, int head_dim, int capacity, cudaStream_t stream);

  // Bytes a cache of this shape takes on the device.
  static std::size_t bytes_for(int num_layers, int num_kv_heads, int head_dim, int capacity);

  int num_layers() const override { return num_layers_; }
  int num_kv_heads() const override { return num_kv_heads_; }
  int head_dim() const { return head_dim_; }
  int capacity() const { return capacity_; }
  cudaStream_t stream() const { return stream_; }
  std::int64_t original_length() const override { return original_length_; }
  DeviceSequenceKv descriptor() { return descriptor_; }
  const DeviceSequenceKv& descriptor() const { return descriptor_; }

  // Host mirror of lengths[layer, ·], [Hkv].
  std::span<const std::int32_t> lengths(int layer) const;
  std::size_t kept_entries() const override;
  // kept_entries · 2 · d · 2 (bf16 K and V), as cpu::KvCache::kept_bytes with 2-byte elements.
  std::size_t kept_bytes() const override;

  // Throws std::length_error naming the head if appending `tokens` more would exceed capacity.
  void check_room(std::int64_t tokens) const;
  // Host bookkeeping after the model appended `tokens` to every head of every layer.
  void record_append(std::int64_t tokens);
  // Uploads the host mirror of the lengths and waits for it, ignoring CUDA errors (a forward that
  // threw midway had advanced the device lengths of some layers: CudaModel::restore_lengths).
  void resync_lengths() noexcept;

  // Evicts like cpu::KvCache::retain, for every (layer, head) at once: keep[layer·Hkv + h] lists
  // the original positions to keep (strictly ascending, a subset of what the head holds). Runs a
  // compaction kernel; throws std::invalid_argument (nothing changes) when a list is invalid.
  void retain(std::span<const std::vector<std::int32_t>> keep);
  // The same from kept[layer][kv_head] (a wrong shape throws std::invalid_argument first).
  void retain(const methods::Selection& selection) override;
  // Drops every entry at an original position ≥ length; original_length() becomes length.
  void truncate(std::int64_t length) override;
  // A deep copy on the device (the fan-out's per-cell copy).
  DeviceKvCache clone() const;
  std::unique_ptr<unit::SequenceCache> fork() const override;

  // Downloads (layer, head): positions [n], keys and values [n, d] as f32.
  void download_head(int layer, int kv_head, std::vector<std::int32_t>& positions,
                     std::vector<float>& keys, std::vector<float>& values) const;

 private:
  void upload_lengths();

  int num_layers_;
  int num_kv_heads_;
  int head_dim_;
  int capacity_;
  cudaStream_t stream_;
  std::int64_t original_length_ = 0;
  std::vector<std::int32_t> host_lengths_;                 // [layers, Hkv]
  std::vector<std::vector<std::int32_t>> host_positions_;  // [layers·Hkv][n] mirror of positions
  DeviceBuffer<__nv_bfloat16> keys_;
  DeviceBuffer<__nv_bfloat16> values_;
  DeviceBuffer<std::int32_t> positions_;
  DeviceBuffer<std::int32_t> lengths_;
  DeviceSequenceKv descriptor_;
};

}  // namespace kvaudit::cuda
