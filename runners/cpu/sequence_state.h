// SequenceState: everything the CPU backend keeps for one sequence between forward calls: its
// ragged KV cache, whose original_length() is the position bookkeeping (the next token's RoPE
// position). Create one with CpuModel::new_sequence(); copy it to fan a prefilled context out to
// several eviction cells (each copy then evicts and decodes on its own).
#pragma once

#include <cstdint>
#include <utility>

#include "runners/cpu/kv_cache.h"

namespace kvaudit::cpu {

class SequenceState {
 public:
  explicit SequenceState(KvCache cache) : cache_(std::move(cache)) {}

  KvCache& kv_cache() { return cache_; }
  const KvCache& kv_cache() const { return cache_; }

  // Tokens processed so far (kept or evicted); the next token gets this RoPE position.
  std::int64_t original_length() const { return cache_.original_length(); }

 private:
  KvCache cache_;
};

}  // namespace kvaudit::cpu
