// The ragged per-head KV cache; see kv_cache.h.
#include "runners/cpu/kv_cache.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "methods/bf16_rounding.h"
#include "methods/key_rerotation.h"
#include "runners/cpu/key_panels.h"
#include "runners/cpu/shape_check.h"

namespace kvaudit::cpu {
namespace {

std::string head_name(int layer, int kv_head) {
  return "layer " + std::to_string(layer) + ", kv head " + std::to_string(kv_head);
}

}  // namespace

KvCache::KvCache(int num_layers, int num_kv_heads, int head_dim, std::size_t bytes_per_element)
    : num_layers_(num_layers),
      num_kv_heads_(num_kv_heads),
      head_dim_(head_dim),
      bytes_per_element_(bytes_per_element) {
  if (num_layers <= 0 || num_kv_heads <= 0 || head_dim <= 0) {
    throw std::invalid_argument("KvCache: layers, kv heads and head_dim must be positive (got " +
                                std::to_string(num_layers) + ", " + std::to_string(num_kv_heads) +
                                ", " + std::to_string(head_dim) + ")");
  }
  heads_.resize(static_cast<std::size_t>(num_layers) * static_cast<std::size_t>(num_kv_heads));
  appended_in_step_.assign(static_cast<std::size_t>(num_layers), 0);
}

const KvCache::HeadStore& KvCache::store(int layer, int kv_head) const {
  if (layer < 0 || layer >= num_layers_ || kv_head < 0 || kv_head >= num_kv_heads_) {
    throw std::out_of_range("KvCache: " + head_name(layer, kv_head) + " does not exist (" +
                            std::to_string(num_layers_) + " layers, " +
                            std::to_string(num_kv_heads_) + " kv heads)");
  }
  return heads_[static_cast<std::size_t>(layer) * static_cast<std::size_t>(num_kv_heads_) +
                static_cast<std::size_t>(kv_head)];
}

KvCache::HeadStore& KvCache::store(int layer, int kv_head) {
  return const_cast<HeadStore&>(static_cast<const KvCache*>(this)->store(layer, kv_head));
}

KvHeadView KvCache::head(int layer, int kv_head) const {
  const HeadStore& s = store(layer, kv_head);
  return {s.positions, s.keys, s.values, s.key_panels};
}

std::size_t KvCache::kept_count(int layer, int kv_head) const {
  return store(layer, kv_head).positions.size();
}

std::size_t KvCache::kept_entries() const {
  std::size_t total = 0;
  for (const HeadStore& s : heads_) total += s.positions.size();
  return total;
}

std::size_t KvCache::kept_bytes() const {
  std::size_t pruned = 0;  // key elements zero_key_channels() freed
  for (const HeadStore& s : heads_) {
    if (s.zeroed_channels.empty()) continue;
    const auto end = std::lower_bound(s.positions.begin(), s.positions.end(), s.zeroed_before);
    pruned += static_cast<std::size_t>(end - s.positions.begin()) * s.zeroed_channels.size();
  }
  return (kept_entries() * 2 * static_cast<std::size_t>(head_dim_) - pruned) * bytes_per_element_;
}

void KvCache::append_layer(int layer, std::span<const std::int32_t> positions,
                           std::span<const float> keys, std::span<const float> values) {
  if (layer < 0 || layer >= num_layers_) {
    throw std::out_of_range("KvCache::append_layer: layer " + std::to_string(layer) +
                            " does not exist");
  }
  std::int64_t& appended = appended_in_step_[static_cast<std::size_t>(layer)];
  if (appended != 0) {
    throw std::logic_error("KvCache::append_layer: layer " + std::to_string(layer) +
                           " was already appended in this step");
  }
  const std::size_t count = positions.size();
  const std::size_t dim = static_cast<std::size_t>(head_dim_);
  const std::size_t row = static_cast<std::size_t>(num_kv_heads_) * dim;
  require_size(keys, count * row, "KvCache::append_layer: keys");
  require_size(values, count * row, "KvCache::append_layer: values");
  if (original_length_ + static_cast<std::int64_t>(count) >
      std::numeric_limits<std::int32_t>::max()) {
    throw std::length_error("KvCache::append_layer: more than 2^31 - 1 positions");
  }
  for (std::size_t t = 0; t < count; ++t) {
    if (positions[t] != original_length_ + static_cast<std::int64_t>(t)) {
      throw std::invalid_argument("KvCache::append_layer: position " +
                                  std::to_string(positions[t]) + " at index " + std::to_string(t) +
                                  ", expected " +
                                  std::to_string(original_length_ + static_cast<std::int64_t>(t)));
    }
  }
  for (int h = 0; h < num_kv_heads_; ++h) {
    HeadStore& s = store(layer, h);
    const std::size_t old_count = s.positions.size();
    s.positions.insert(s.positions.end(), positions.begin(), positions.end());
    s.key_panels.resize(key_panel_floats(old_count + count, dim), 0.0f);
    for (std::size_t t = 0; t < count; ++t) {
      const std::size_t offset = t * row + static_cast<std::size_t>(h) * dim;
      s.keys.insert(s.keys.end(), keys.begin() + static_cast<std::ptrdiff_t>(offset),
                    keys.begin() + static_cast<std::ptrdiff_t>(offset + dim));
      s.values.insert(s.values.end(), values.begin() + static_cast<std::ptrdiff_t>(offset),
                      values.begin() + static_cast<std::ptrdiff_t>(offset + dim));
      write_key_to_panels(s.key_panels.data(), old_count + t, keys.data() + offset, dim);
    }
  }
  appended = static_cast<std::int64_t>(count);
}

void KvCache::commit_step(std::int64_t num_tokens) {
  for (int layer = 0; layer < num_layers_; ++layer) {
    if (appended_in_step_[static_cast<std::size_t>(layer)] != num_tokens) {
      throw std::logic_error("KvCache::commit_step: layer " + std::to_string(layer) + " has " +
                             std::to_string(appended_in_step_[static_cast<std::size_t>(layer)]) +
                             " appended tokens, expected " + std::to_string(num_tokens));
    }
  }
  original_length_ += num_tokens;
  std::fill(appended_in_step_.begin(), appended_in_step_.end(), 0);
}

void KvCache::discard_uncommitted() {
  const std::size_t dim = static_cast<std::size_t>(head_dim_);
  for (HeadStore& s : heads_) {
    // Uncommitted entries are the trailing ones at positions ≥ original_length().
    std::size_t keep = s.positions.size();
    while (keep > 0 && s.positions[keep - 1] >= original_length_) --keep;
    if (keep == s.positions.size()) continue;
    s.positions.resize(keep);
    s.keys.resize(keep * dim);
    s.values.resize(keep * dim);
    s.key_panels = keys_to_panels(s.keys.data(), keep, dim);
  }
  std::fill(appended_in_step_.begin(), appended_in_step_.end(), 0);
}

void KvCache::retain(int layer, int kv_head, std::span<const std::int32_t> keep) {
  HeadStore& s = store(layer, kv_head);
  if (std::any_of(appended_in_step_.begin(), appended_in_step_.end(),
                  [](std::int64_t n) { return n != 0; })) {
    throw std::logic_error("KvCache::retain: called in the middle of a forward step");
  }
  // Map every kept position to its current index (both lists ascending: one merge pass), checking
  // the request before anything is modified.
  std::vector<std::size_t> source_index;
  source_index.reserve(keep.size());
  std::size_t cursor = 0;
  for (std::size_t i = 0; i < keep.size(); ++i) {
    if (i > 0 && keep[i] <= keep[i - 1]) {
      throw std::invalid_argument("KvCache::retain(" + head_name(layer, kv_head) +
                                  "): positions must be strictly ascending, but " +
                                  std::to_string(keep[i]) + " follows " +
                                  std::to_string(keep[i - 1]));
    }
    while (cursor < s.positions.size() && s.positions[cursor] < keep[i]) ++cursor;
    if (cursor == s.positions.size() || s.positions[cursor] != keep[i]) {
      throw std::invalid_argument("KvCache::retain(" + head_name(layer, kv_head) + "): position " +
                                  std::to_string(keep[i]) + " is not held by this head");
    }
    source_index.push_back(cursor);
  }
  const std::size_t dim = static_cast<std::size_t>(head_dim_);
  for (std::size_t i = 0; i < source_index.size(); ++i) {
    const std::size_t from = source_index[i];  // from ≥ i: compaction moves entries forward
    if (from == i) continue;
    s.positions[i] = s.positions[from];
    std::copy_n(s.keys.begin() + static_cast<std::ptrdiff_t>(from * dim), dim,
                s.keys.begin() + static_cast<std::ptrdiff_t>(i * dim));
    std::copy_n(s.values.begin() + static_cast<std::ptrdiff_t>(from * dim), dim,
                s.values.begin() + static_cast<std::ptrdiff_t>(i * dim));
  }
  s.positions.resize(keep.size());
  s.keys.resize(keep.size() * dim);
  s.values.resize(keep.size() * dim);
  s.positions.shrink_to_fit();
  s.keys.shrink_to_fit();
  s.values.shrink_to_fit();
  s.key_panels = keys_to_panels(s.keys.data(), keep.size(), dim);
}

void KvCache::rerotate_keys(int layer, int kv_head, std::span<const float> inv_freq,
                            bool model_is_bf16) {
  HeadStore& s = store(layer, kv_head);
  const std::size_t dim = static_cast<std::size_t>(head_dim_);
  s.keys = methods::rerotate_keys(s.keys, s.positions, inv_freq, head_dim_, model_is_bf16);
  s.key_panels = keys_to_panels(s.keys.data(), s.positions.size(), dim);
}

void KvCache::replace_value(int layer, int kv_head, std::int32_t position,
                            std::span<const float> value, bool model_is_bf16) {
  HeadStore& s = store(layer, kv_head);
  const std::size_t dim = static_cast<std::size_t>(head_dim_);
  if (value.size() != dim) {
    throw std::invalid_argument("KvCache::replace_value: " + head_name(layer, kv_head) +
                                ": value has " + std::to_string(value.size()) +
                                " elements, head_dim is " + std::to_string(head_dim_));
  }
  const auto it = std::lower_bound(s.positions.begin(), s.positions.end(), position);
  if (it == s.positions.end() || *it != position) {
    throw std::invalid_argument("KvCache::replace_value: " + head_name(layer, kv_head) +
                                " does not keep position " + std::to_string(position));
  }
  float* row = s.values.data() + static_cast<std::size_t>(it - s.positions.begin()) * dim;
  for (std::size_t m = 0; m < dim; ++m) row[m] = methods::maybe_bf16(value[m], model_is_bf16);
}

void KvCache::zero_key_channels(int layer, int kv_head, std::span<const std::int32_t> channels) {
  HeadStore& s = store(layer, kv_head);
  const std::string where = "KvCache::zero_key_channels(" + head_name(layer, kv_head) + "): ";
  if (std::any_of(appended_in_step_.begin(), appended_in_step_.end(),
                  [](std::int64_t n) { return n != 0; }))
    throw std::logic_error(where + "called in the middle of a forward step");
  if (!s.zeroed_channels.empty())
    throw std::invalid_argument(where + "the head's key channels were already pruned");
  for (std::size_t i = 0; i < channels.size(); ++i) {
    if (channels[i] < 0 || channels[i] >= head_dim_ || (i > 0 && channels[i] <= channels[i - 1]))
      throw std::invalid_argument(where + "channels must be strictly ascending in [0, " +
                                  std::to_string(head_dim_) + "), got " +
                                  std::to_string(channels[i]) + " at index " + std::to_string(i));
  }
  if (channels.empty()) return;
  const std::size_t dim = static_cast<std::size_t>(head_dim_);
  const std::size_t count = s.positions.size();
  for (std::size_t i = 0; i < count; ++i)
    for (const std::int32_t c : channels) s.keys[i * dim + static_cast<std::size_t>(c)] = 0.0f;
  s.key_panels = keys_to_panels(s.keys.data(), count, dim);
  s.zeroed_channels.assign(channels.begin(), channels.end());
  s.zeroed_before = original_length_;
}

std::span<const std::int32_t> KvCache::zeroed_key_channels(int layer, int kv_head) const {
  return store(layer, kv_head).zeroed_channels;
}

void KvCache::truncate(std::int64_t length) {
  if (length < 0 || length > original_length_) {
    throw std::invalid_argument("KvCache::truncate: length " + std::to_string(length) +
                                " is outside [0, " + std::to_string(original_length_) + "]");
  }
  if (std::any_of(appended_in_step_.begin(), appended_in_step_.end(),
                  [](std::int64_t n) { return n != 0; })) {
    throw std::logic_error("KvCache::truncate: called in the middle of a forward step");
  }
  const std::size_t dim = static_cast<std::size_t>(head_dim_);
  for (HeadStore& s : heads_) {
    // Keys appended after the rewind keep every channel (zero_key_channels).
    s.zeroed_before = std::min(s.zeroed_before, length);
    // Positions are ascending: the dropped entries are a suffix.
    const auto end = std::lower_bound(s.positions.begin(), s.positions.end(), length);
    const std::size_t keep = static_cast<std::size_t>(end - s.positions.begin());
    if (keep == s.positions.size()) continue;
    s.positions.resize(keep);
    s.keys.resize(keep * dim);
    s.values.resize(keep * dim);
    // Panel lanes past the last kept key must read as zero (key_panels.h).
    s.key_panels = keys_to_panels(s.keys.data(), keep, dim);
  }
  original_length_ = length;
}

}  // namespace kvaudit::cpu
