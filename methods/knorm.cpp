// KnormScorer (knorm.h).
#include "methods/knorm.h"

#include <cmath>
#include <cstddef>

namespace kvaudit::methods {

void KnormScorer::score(const LayerCapture& layer, const SelectionContext&,
                        std::span<float> scores) const {
  const auto L = static_cast<std::size_t>(layer.length);
  const auto d = static_cast<std::size_t>(layer.head_dim);
  for (std::size_t h = 0; h < static_cast<std::size_t>(layer.num_kv_heads); ++h) {
    const float* keys = layer.keys[h].data();
    for (std::size_t j = 0; j < L; ++j) {
      double sq = 0.0;
      for (std::size_t c = 0; c < d; ++c)
        sq += static_cast<double>(keys[j * d + c]) * keys[j * d + c];
      scores[h * L + j] = -static_cast<float>(std::sqrt(sq));
    }
  }
}

}  // namespace kvaudit::methods
