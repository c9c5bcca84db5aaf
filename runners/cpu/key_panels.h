// The key layout the attention kernels read: keys in panels of kKeyPanel consecutive entries, each
// panel stored transposed, [panel][head_dim][kKeyPanel], unused lanes of the last panel zero. Entry
// j element e lives at panels[(j / kKeyPanel)·head_dim·kKeyPanel + e·kKeyPanel + j % kKeyPanel].
// With it, the score kernel loads 32 keys' e-th elements as one vector (no transposition at
// attention time). KvCache keeps this copy of the keys next to the row-major one and extends it on
// append.
#pragma once

#include <cstddef>
#include <vector>

namespace kvaudit::cpu {

inline constexpr std::size_t kKeyPanel = 32;

// Floats taken by `count` keys in panel layout: round_up(count, kKeyPanel) · dim.
inline std::size_t key_panel_floats(std::size_t count, std::size_t dim) {
  return (count + kKeyPanel - 1) / kKeyPanel * kKeyPanel * dim;
}

// Writes key [dim] as entry `index` of `panels` (which must hold key_panel_floats(index + 1, dim)).
inline void write_key_to_panels(float* panels, std::size_t index, const float* key,
                                std::size_t dim) {
  float* lane = panels + (index / kKeyPanel) * dim * kKeyPanel + index % kKeyPanel;
  for (std::size_t e = 0; e < dim; ++e) lane[e * kKeyPanel] = key[e];
}

// keys [count, dim] row-major → panel layout.
inline std::vector<float> keys_to_panels(const float* keys, std::size_t count, std::size_t dim) {
  std::vector<float> panels(key_panel_floats(count, dim), 0.0f);
  for (std::size_t j = 0; j < count; ++j)
    write_key_to_panels(panels.data(), j, keys + j * dim, dim);
  return panels;
}

}  // namespace kvaudit::cpu
