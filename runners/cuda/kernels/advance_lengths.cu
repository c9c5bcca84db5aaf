// advance_lengths (kernels.h): lengths[layer, h] += new_tokens[s] for every sequence s and KV head
// h, after rope_split_append wrote the new entries (device_sequence_kv.h: append, then advance).
// The CPU twin is the bookkeeping of cpu::KvCache::append_layer. One block per sequence, threads
// across its KV heads (their count is read from the device descriptor). A count that is negative
// or would pass the capacity traps.
#include <cstdint>
#include <string>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/kernels/kernel_checks.h"
#include "runners/cuda/kernels/kernels.h"

namespace kvaudit::cuda {
namespace {

constexpr int kThreads = 32;

__global__ void advance_lengths_kernel(const DeviceSequenceKv* sequences, int layer,
                                       const std::int32_t* new_tokens) {
  const int s = static_cast<int>(blockIdx.x);
  const DeviceSequenceKv sequence = sequences[s];
  const std::int32_t added = new_tokens[s];
  KVAUDIT_DEVICE_REQUIRE(added >= 0, "advance_lengths: negative token count");
  for (int h = static_cast<int>(threadIdx.x); h < sequence.num_kv_heads; h += kThreads) {
    std::int32_t& length = sequence.lengths[sequence.head_index(layer, h)];
    const std::int64_t advanced = static_cast<std::int64_t>(length) + added;
    KVAUDIT_DEVICE_REQUIRE(advanced <= sequence.capacity,
                           "advance_lengths: the length would pass the cache's capacity");
    length = static_cast<std::int32_t>(advanced);
  }
}

}  // namespace

void advance_lengths(const DeviceSequenceKv* sequences, int num_sequences, int layer,
                     const std::int32_t* new_tokens, cudaStream_t stream) {
  using kernel_checks::require;
  require(num_sequences >= 0, "advance_lengths",
          "num_sequences must be non-negative, got " + std::to_string(num_sequences));
  require(layer >= 0, "advance_lengths",
          "layer must be non-negative, got " + std::to_string(layer));
  if (num_sequences == 0) return;
  require(sequences != nullptr && new_tokens != nullptr, "advance_lengths",
          "sequences and new_tokens must be device pointers, got a null pointer");
  advance_lengths_kernel<<<static_cast<unsigned int>(num_sequences), kThreads, 0, stream>>>(
      sequences, layer, new_tokens);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

}  // namespace kvaudit::cuda
