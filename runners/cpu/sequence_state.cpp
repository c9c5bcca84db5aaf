// SequenceState::retain; see sequence_state.h.
#include "runners/cpu/sequence_state.h"

namespace kvaudit::cpu {

void SequenceState::retain(const methods::Selection& selection) {
  unit::check_selection_shape(selection, cache_.num_layers(), cache_.num_kv_heads());
  for (std::size_t layer = 0; layer < selection.kept.size(); ++layer) {
    for (std::size_t head = 0; head < selection.kept[layer].size(); ++head) {
      cache_.retain(static_cast<int>(layer), static_cast<int>(head), selection.kept[layer][head]);
    }
  }
}

void SequenceState::rerotate_kept_keys(std::span<const float> inv_freq, bool model_is_bf16) {
  for (int layer = 0; layer < cache_.num_layers(); ++layer)
    for (int head = 0; head < cache_.num_kv_heads(); ++head)
      cache_.rerotate_keys(layer, head, inv_freq, model_is_bf16);
}

}  // namespace kvaudit::cpu
