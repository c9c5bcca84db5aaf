// KvCache: the ragged per-head KV cache of one sequence on the CPU backend.
//
// For every (layer, KV head) the cache holds the tokens that head still keeps:
//   positions [n]            original token positions, int32, strictly ascending
//   keys      [n, head_dim]  post-RoPE keys (as HF's cache stores them)
//   values    [n, head_dim]
//   key_panels the same keys in the attention kernels' layout (key_panels.h), kept in step
// Heads are independent ("ragged"): after retain() each head may keep a different set and count,
// which is how head-wise budgets (AdaKV and friends) become real evictions rather than masks
// (docs/design/protocols.md §Real eviction; kvpress masks instead, docs/design/kvpress.md
// §Head-wise masking).
//
// Positions: every token ever appended gets the next original position. original_length() counts
// them, evicted or not, and is the RoPE position of the next token: after eviction new tokens
// continue at the ORIGINAL length, not at the kept count (kvpress pipeline,
// docs/design/protocols.md §Positions after eviction).
//
// Appending is transactional per forward step: the model appends to each layer (append_layer), then
// commits the step (commit_step); if the step fails, discard_uncommitted() drops what was appended.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvaudit::cpu {

// Read-only view of one (layer, KV head) of the cache.
struct KvHeadView {
  std::span<const std::int32_t> positions;  // [n], strictly ascending
  std::span<const float> keys;              // [n, head_dim], post-RoPE
  std::span<const float> values;            // [n, head_dim]
  std::span<const float> key_panels;        // the keys in key_panels.h layout (for the kernels)
  std::size_t size() const { return positions.size(); }
};

class KvCache {
 public:
  // bytes_per_element is the storage size a real engine would use for one K or V element (2 for
  // bf16 checkpoints, 4 for f32); it only feeds kept_bytes().
  KvCache(int num_layers, int num_kv_heads, int head_dim, std::size_t bytes_per_element);

  int num_layers() const { return num_layers_; }
  int num_kv_heads() const { return num_kv_heads_; }
  int head_dim() const { return head_dim_; }

  // Tokens ever committed to this cache (kept or evicted) = the RoPE position of the next token.
  std::int64_t original_length() const { return original_length_; }
  std::int32_t next_position() const { return static_cast<std::int32_t>(original_length_); }

  KvHeadView head(int layer, int kv_head) const;
  std::size_t kept_count(int layer, int kv_head) const;
  // Sum of kept entries over all layers and KV heads.
  std::size_t kept_entries() const;
  // Bytes the kept keys and values take at the checkpoint's precision:
  // kept_entries() · 2 (K and V) · head_dim · bytes_per_element (positions are not counted),
  // less, per (layer, KV head), the key channels zero_key_channels() pruned in each entry it pruned
  // them from (Σ_heads Σ_entries (2·head_dim − pruned channels of the entry) · bytes_per_element).
  std::size_t kept_bytes() const;

  // Appends T tokens to every KV head of `layer`:
  //   positions [T] must be next_position(), next_position()+1, ...
  //   keys      [T, num_kv_heads, head_dim] (post-RoPE), values [T, num_kv_heads, head_dim].
  // Each layer is appended at most once per step. Throws std::invalid_argument on a shape mismatch.
  void append_layer(int layer, std::span<const std::int32_t> positions, std::span<const float> keys,
                    std::span<const float> values);
  // Ends a step of `num_tokens` tokens: every layer must have been appended exactly that many.
  void commit_step(std::int64_t num_tokens);
  // Drops entries appended since the last commit (after a failed step); the cache is as before.
  void discard_uncommitted();

  // Evicts: (layer, kv_head) keeps exactly the tokens whose original positions are listed in
  // `keep`, which must be strictly ascending and a subset of what the head holds now; the others
  // are removed and the head is compacted. Throws std::invalid_argument otherwise (nothing
  // changes).
  void retain(int layer, int kv_head, std::span<const std::int32_t> keep);
  // key_rerotation: rotates every key of (layer, kv_head) from its original position p to its
  // index i in the head (methods::rerotate_keys; unit::SequenceCache::rerotate_kept_keys);
  // positions and values are unchanged, the key panels follow.
  void rerotate_keys(int layer, int kv_head, std::span<const float> inv_freq, bool model_is_bf16);
  // merging: overwrites the value [head_dim] of the entry at original `position` of
  // (layer, kv_head), rounded to bf16 when model_is_bf16 (the checkpoint's storage precision);
  // positions, keys and key panels are unchanged (values have no derived layout). Throws
  // std::invalid_argument if the head does not keep `position` or the length is not head_dim
  // (nothing changes).
  void replace_value(int layer, int kv_head, std::int32_t position, std::span<const float> value,
                     bool model_is_bf16);

  // think (methods/think.h): sets key channels `channels` (strictly ascending, each in
  // [0, head_dim)) to zero in every key (layer, kv_head) holds now, key panels included; keys
  // appended later keep all their channels (kvpress zeroes the compressed prefill only). From then
  // on kept_bytes() counts those channels of those entries as freed (an engine storing only the
  // live channels would not hold them). A head is pruned at most once. Throws
  // std::invalid_argument on a bad list or a second pruning of the head (nothing changes).
  void zero_key_channels(int layer, int kv_head, std::span<const std::int32_t> channels);
  // The channels zero_key_channels() pruned in (layer, kv_head) (empty if none).
  std::span<const std::int32_t> zeroed_key_channels(int layer, int kv_head) const;

  // Rewinds the cache to `length` tokens: every entry at an original position ≥ length is dropped
  // from every head and original_length() becomes `length`, so the next token gets RoPE position
  // `length` again (the unit runner drops a prefilled question to feed it on top of a compressed
  // context). Throws std::invalid_argument if length is negative or above original_length(), and
  // std::logic_error in the middle of a forward step (nothing changes).
  void truncate(std::int64_t length);

 private:
  struct HeadStore {
    std::vector<std::int32_t> positions;  // [n]
    std::vector<float> keys;              // [n, head_dim]
    std::vector<float> values;            // [n, head_dim]
    std::vector<float> key_panels;  // [round_up(n, kKeyPanel) / kKeyPanel, head_dim, kKeyPanel]
    // think: key channels zeroed in the entries at positions < zeroed_before (zero_key_channels).
    std::vector<std::int32_t> zeroed_channels;
    std::int64_t zeroed_before = 0;
  };
  const HeadStore& store(int layer, int kv_head) const;
  HeadStore& store(int layer, int kv_head);

  int num_layers_;
  int num_kv_heads_;
  int head_dim_;
  std::size_t bytes_per_element_;
  std::int64_t original_length_ = 0;
  std::vector<HeadStore> heads_;                // [num_layers * num_kv_heads]
  std::vector<std::int64_t> appended_in_step_;  // [num_layers]: tokens appended since last commit
};

}  // namespace kvaudit::cpu
