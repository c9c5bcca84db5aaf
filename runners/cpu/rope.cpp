// The rotate-half application of RoPE; see rope.h.
#include "runners/cpu/rope.h"

#include <cstddef>

#include "runners/cpu/shape_check.h"

namespace kvaudit::cpu {

void apply_rope(std::span<float> x, int num_heads, int head_dim, std::span<const float> cos,
                std::span<const float> sin, Rounding rounding) {
  const std::size_t d = static_cast<std::size_t>(head_dim);
  const std::size_t half = d / 2;
  const std::size_t rows = cos.size() / (d == 0 ? 1 : d);
  require_size(sin, cos.size(), "apply_rope: sin");
  require_size(x, rows * static_cast<std::size_t>(num_heads) * d, "apply_rope: x");
  const std::ptrdiff_t vectors = static_cast<std::ptrdiff_t>(rows) * num_heads;
#pragma omp parallel for schedule(static) if (x.size() > (1u << 16))
  for (std::ptrdiff_t v = 0; v < vectors; ++v) {
    const std::size_t t = static_cast<std::size_t>(v) / static_cast<std::size_t>(num_heads);
    float* xv = x.data() + static_cast<std::size_t>(v) * d;
    const float* c = cos.data() + t * d;
    const float* s = sin.data() + t * d;
    for (std::size_t i = 0; i < half; ++i) {
      const float first = xv[i];
      const float second = xv[i + half];
      // out[i]        = x[i]·cos[i]        + (−x[i+half])·sin[i]
      // out[i + half] = x[i+half]·cos[i+half] + x[i]·sin[i+half]
      const float a = round_as(rounding, first * c[i]);
      const float b = round_as(rounding, -second * s[i]);
      const float e = round_as(rounding, second * c[i + half]);
      const float f = round_as(rounding, first * s[i + half]);
      xv[i] = round_as(rounding, a + b);
      xv[i + half] = round_as(rounding, e + f);
    }
  }
}

}  // namespace kvaudit::cpu
