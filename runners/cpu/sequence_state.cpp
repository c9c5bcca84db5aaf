// SequenceState::retain; see sequence_state.h.
#include "runners/cpu/sequence_state.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvaudit::cpu {

void SequenceState::retain(const methods::Selection& selection) {
  unit::check_selection_shape(selection, cache_.num_layers(), cache_.num_kv_heads());
  for (std::size_t layer = 0; layer < selection.kept.size(); ++layer) {
    for (std::size_t head = 0; head < selection.kept[layer].size(); ++head) {
      cache_.retain(static_cast<int>(layer), static_cast<int>(head), selection.kept[layer][head]);
    }
  }
}

void SequenceState::replace_values(const methods::Selection& selection, bool model_is_bf16) {
  for (const auto& r : selection.value_replacements) {
    if (r.layer < 0 || r.layer >= cache_.num_layers() || r.kv_head < 0 ||
        r.kv_head >= cache_.num_kv_heads())
      throw std::invalid_argument("replace_values: layer " + std::to_string(r.layer) +
                                  ", kv head " + std::to_string(r.kv_head) +
                                  " is not in the cache");
    const auto positions = cache_.head(r.layer, r.kv_head).positions;
    if (!std::binary_search(positions.begin(), positions.end(), r.position) ||
        r.value.size() != static_cast<std::size_t>(cache_.head_dim()))
      throw std::invalid_argument("replace_values: layer " + std::to_string(r.layer) +
                                  ", kv head " + std::to_string(r.kv_head) + ", position " +
                                  std::to_string(r.position) +
                                  ": not a kept entry or not head_dim values");
  }
  for (const auto& r : selection.value_replacements)
    cache_.replace_value(r.layer, r.kv_head, r.position, r.value, model_is_bf16);
}

void SequenceState::zero_key_channels(const methods::Selection& selection) {
  const auto& lists = selection.zeroed_key_channels;
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("zero_key_channels: " + what);
  };
  if (lists.size() != static_cast<std::size_t>(cache_.num_layers()))
    fail(std::to_string(lists.size()) + " layers, the cache has " +
         std::to_string(cache_.num_layers()));
  for (std::size_t layer = 0; layer < lists.size(); ++layer) {
    if (lists[layer].size() != static_cast<std::size_t>(cache_.num_kv_heads()))
      fail("layer " + std::to_string(layer) + " lists " + std::to_string(lists[layer].size()) +
           " KV heads, the cache has " + std::to_string(cache_.num_kv_heads()));
    for (std::size_t head = 0; head < lists[layer].size(); ++head) {
      const auto& channels = lists[layer][head];
      for (std::size_t i = 0; i < channels.size(); ++i)
        if (channels[i] < 0 || channels[i] >= cache_.head_dim() ||
            (i > 0 && channels[i] <= channels[i - 1]))
          fail("layer " + std::to_string(layer) + ", kv head " + std::to_string(head) +
               ": channels must be strictly ascending in [0, " + std::to_string(cache_.head_dim()) +
               ")");
      if (!channels.empty() &&
          !cache_.zeroed_key_channels(static_cast<int>(layer), static_cast<int>(head)).empty())
        fail("layer " + std::to_string(layer) + ", kv head " + std::to_string(head) +
             ": its key channels were already pruned");
    }
  }
  for (std::size_t layer = 0; layer < lists.size(); ++layer)
    for (std::size_t head = 0; head < lists[layer].size(); ++head)
      cache_.zero_key_channels(static_cast<int>(layer), static_cast<int>(head), lists[layer][head]);
}

void SequenceState::rerotate_kept_keys(std::span<const float> inv_freq, bool model_is_bf16) {
  for (int layer = 0; layer < cache_.num_layers(); ++layer)
    for (int head = 0; head < cache_.num_kv_heads(); ++head)
      cache_.rerotate_keys(layer, head, inv_freq, model_is_bf16);
}

}  // namespace kvaudit::cpu
