// Test helpers of the kernel tests around the device KV-cache layout (upload: tests/cuda/
// device_kv_upload.h): read a head or the lengths back, and build ragged CPU caches (append a
// history, then keep a random subset per head) as the references of the kernel tests.
#pragma once

#include <cstdint>
#include <vector>

#include "runners/cpu/kv_cache.h"
#include "runners/cuda/device_buffer.h"
#include "runners/cuda/device_sequence_kv.h"
#include "tests/cuda/device_kv_upload.h"
#include "tests/cuda/kernels/test_data.h"

namespace kvaudit::cuda::test {

struct HeadContents {
  std::vector<std::int32_t> positions;  // [n]
  std::vector<float> keys;              // [n, d]
  std::vector<float> values;            // [n, d]
};

// (layer, kv_head) as the device holds it now (n read from the device lengths).
HeadContents download_head(const DeviceKvCopy& cache, int layer, int kv_head);
// The same head of a CPU cache.
HeadContents cpu_head(const cpu::KvCache& cache, int layer, int kv_head);
// lengths [layers · Hkv] as the device holds them now.
std::vector<std::int32_t> download_lengths(const DeviceKvCopy& cache, int num_layers);

// A CPU cache with `history` tokens appended to every layer in one step (random bf16 keys and
// values in [−amplitude, amplitude)).
cpu::KvCache make_history_cache(int num_layers, int num_kv_heads, int head_dim, int history,
                                float amplitude, TestRandom& random);

// Keeps a random subset of every (layer, head): head LH keeps each entry with probability
// fraction · (0.6 + 0.4·(LH mod 3)/2) (so heads differ), always keeping the newest entry (the
// decode query's own key). fraction ≥ 1 keeps everything.
void retain_random_subsets(cpu::KvCache& cache, double fraction, TestRandom& random);

}  // namespace kvaudit::cuda::test
