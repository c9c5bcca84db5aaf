// SiLU·mul and the residual add; see elementwise.h.
#include "runners/cpu/elementwise.h"

#include <cmath>
#include <cstddef>

#include "runners/cpu/shape_check.h"

namespace kvaudit::cpu {

void silu_mul(std::span<const float> gate, std::span<const float> up, Rounding rounding,
              std::span<float> out) {
  require_size(up, gate.size(), "silu_mul: up");
  require_size(out, gate.size(), "silu_mul: out");
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(gate.size());
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const float g = gate[static_cast<std::size_t>(i)];
    const float activated = round_as(rounding, g / (1.0f + std::exp(-g)));
    out[static_cast<std::size_t>(i)] =
        round_as(rounding, activated * up[static_cast<std::size_t>(i)]);
  }
}

void residual_add(std::span<float> residual, std::span<const float> delta, Rounding rounding) {
  require_size(delta, residual.size(), "residual_add: delta");
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(residual.size());
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const std::size_t k = static_cast<std::size_t>(i);
    residual[k] = round_as(rounding, residual[k] + delta[k]);
  }
}

}  // namespace kvaudit::cpu
