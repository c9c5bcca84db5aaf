// Budget arithmetic and Selection helpers of method.h (kvpress 0.5.5 `compute_n_kept`).
#include "methods/method.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace kvaudit::methods {

std::int64_t Selection::kept_entries() const {
  std::int64_t total = 0;
  for (const auto& layer : kept)
    for (const auto& head : layer) total += static_cast<std::int64_t>(head.size());
  return total;
}

std::int64_t kept_count(std::int64_t length, double compression) {
  if (length < 1) throw std::invalid_argument("kept_count: length must be >= 1");
  if (!(compression >= 0.0 && compression < 1.0))
    throw std::invalid_argument("kept_count: compression " + std::to_string(compression) +
                                " is outside [0, 1)");
  // Python: int(k_len * (1 - compression_ratio)): the product in IEEE double, truncated.
  const double product = static_cast<double>(length) * (1.0 - compression);
  const auto n = static_cast<std::int64_t>(std::floor(product));
  return n < 1 ? 1 : n;
}

}  // namespace kvaudit::methods
