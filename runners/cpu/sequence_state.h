// SequenceState: everything the CPU backend keeps for one sequence between forward calls: its
// ragged KV cache, whose original_length() is the position bookkeeping (the next token's RoPE
// position). Create one with CpuModel::new_sequence() (or, through the engine interface,
// new_cache()); fork() it to fan a prefilled context out to several eviction cells (each copy then
// evicts and decodes on its own). It is the CPU backend's unit::SequenceCache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "runners/cpu/kv_cache.h"
#include "runners/unit/inference_engine.h"

namespace kvaudit::cpu {

class SequenceState : public unit::SequenceCache {
 public:
  explicit SequenceState(KvCache cache) : cache_(std::move(cache)) {}

  KvCache& kv_cache() { return cache_; }
  const KvCache& kv_cache() const { return cache_; }

  int num_layers() const override { return cache_.num_layers(); }
  int num_kv_heads() const override { return cache_.num_kv_heads(); }
  // Tokens processed so far (kept or evicted); the next token gets this RoPE position.
  std::int64_t original_length() const override { return cache_.original_length(); }
  std::size_t kept_entries() const override { return cache_.kept_entries(); }
  std::size_t kept_bytes() const override { return cache_.kept_bytes(); }

  std::unique_ptr<unit::SequenceCache> fork() const override {
    return std::make_unique<SequenceState>(*this);
  }
  void truncate(std::int64_t length) override { cache_.truncate(length); }
  unit::CacheHeadEntries head_entries(int layer, int kv_head) const override {
    const KvHeadView view = cache_.head(layer, kv_head);
    return {.positions = view.positions, .keys = view.keys, .values = view.values};
  }
  // KvCache::retain for every (layer, KV head) in order; a wrong shape throws before any change.
  void retain(const methods::Selection& selection) override;
  // KvCache::rerotate_keys for every (layer, KV head).
  void rerotate_kept_keys(std::span<const float> inv_freq, bool model_is_bf16) override;
  // KvCache::replace_value for every selection.value_replacements entry (merging); every entry is
  // checked (layer, head, a kept position, head_dim values) before any value changes.
  void replace_values(const methods::Selection& selection, bool model_is_bf16) override;
  // KvCache::zero_key_channels for every (layer, KV head) of selection.zeroed_key_channels (think);
  // the whole list is checked (shape, channels strictly ascending in [0, head_dim), heads not
  // pruned before) before any key changes.
  void zero_key_channels(const methods::Selection& selection) override;

 private:
  KvCache cache_;
};

}  // namespace kvaudit::cpu
