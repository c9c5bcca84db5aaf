// RMSNorm; see rms_norm.h for the formula and rounding points.
#include "runners/cpu/rms_norm.h"

#include <cmath>
#include <cstddef>

#include "runners/cpu/shape_check.h"

namespace kvaudit::cpu {

void rms_norm(std::span<const float> x, std::span<const float> weight, int hidden, float eps,
              Rounding rounding, std::span<float> out) {
  require_size(weight, static_cast<std::size_t>(hidden), "rms_norm: weight");
  require_size(out, x.size(), "rms_norm: out");
  if (hidden <= 0 || x.size() % static_cast<std::size_t>(hidden) != 0) {
    require_size(x, 0, "rms_norm: x (not a whole number of rows)");
  }
  const std::ptrdiff_t rows =
      static_cast<std::ptrdiff_t>(x.size() / static_cast<std::size_t>(hidden));
#pragma omp parallel for schedule(static) if (x.size() > (1u << 16))
  for (std::ptrdiff_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * hidden;
    float* outr = out.data() + r * hidden;
    // The mean of squares is accumulated in double and rounded once to f32: the fp32 value
    // PyTorch's (pairwise, fp32) reduction approximates to within a few ulps.
    double sum_squares = 0.0;
    for (int i = 0; i < hidden; ++i) sum_squares += static_cast<double>(xr[i]) * xr[i];
    const float variance = static_cast<float>(sum_squares / hidden);
    const float inverse_rms = 1.0f / std::sqrt(variance + eps);
    for (int i = 0; i < hidden; ++i) {
      const float normalized = round_as(rounding, xr[i] * inverse_rms);
      outr[i] = round_as(rounding, weight[static_cast<std::size_t>(i)] * normalized);
    }
  }
}

}  // namespace kvaudit::cpu
