// ObservedAttentionScorer (observed_attention.h).
#include "methods/observed_attention.h"

#include <cstddef>

#include "methods/capture_checks.h"

namespace kvaudit::methods {

void ObservedAttentionScorer::score(const LayerCapture& layer, const SelectionContext&,
                                    std::span<float> scores) const {
  check_column_sums(layer, name());
  const auto L = static_cast<std::size_t>(layer.length);
  const auto g = static_cast<std::size_t>(layer.group_size());
  for (std::size_t kv = 0; kv < static_cast<std::size_t>(layer.num_kv_heads); ++kv) {
    for (std::size_t j = 0; j < L; ++j) {
      double sum = 0.0;
      for (std::size_t m = 0; m < g; ++m)
        sum += static_cast<double>(layer.column_sums[(kv * g + m) * L + j]) /
               static_cast<double>(L - j);
      scores[kv * L + j] = static_cast<float>(sum / static_cast<double>(g));
    }
  }
}

}  // namespace kvaudit::methods
