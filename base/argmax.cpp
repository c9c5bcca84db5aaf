// argmax_token; see argmax.h.
#include "base/argmax.h"

#include <cmath>
#include <cstddef>
#include <stdexcept>

namespace kvaudit {

std::int32_t argmax_token(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("argmax_token: empty logits");
  std::size_t best = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) return static_cast<std::int32_t>(i);
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<std::int32_t>(best);
}

}  // namespace kvaudit
