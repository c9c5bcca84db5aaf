// Test helper: CPU-vs-GPU attention agreement in bf16 ulps (attention_agreement.h).
#include "tests/cuda/attention/attention_agreement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace kvaudit::cuda::test {
namespace {

// The spacing of bf16 values (8 significant bits) at magnitude x > 0.
double bf16_ulp(double x) {
  if (!(x > 0.0)) return std::ldexp(1.0, -133);  // the smallest bf16 subnormal
  int exponent = 0;
  std::frexp(x, &exponent);  // x = m · 2^exponent, m ∈ [0.5, 1)
  return std::ldexp(1.0, std::max(exponent - 8, -133));
}

}  // namespace

void Agreement::merge(const Agreement& other) {
  count += other.count;
  differing += other.differing;
  nonfinite += other.nonfinite;
  max_abs = std::max(max_abs, other.max_abs);
  max_ulps = std::max(max_ulps, other.max_ulps);
}

Agreement compare_attention(std::span<const float> reference, std::span<const float> gpu,
                            std::size_t vector_length) {
  if (reference.size() != gpu.size() || vector_length == 0 ||
      reference.size() % vector_length != 0) {
    throw std::invalid_argument("compare_attention: sizes " + std::to_string(reference.size()) +
                                " and " + std::to_string(gpu.size()) + " do not form vectors of " +
                                std::to_string(vector_length));
  }
  Agreement agreement;
  for (std::size_t begin = 0; begin < reference.size(); begin += vector_length) {
    double squares = 0.0;
    for (std::size_t e = begin; e < begin + vector_length; ++e) {
      squares += static_cast<double>(reference[e]) * static_cast<double>(reference[e]);
    }
    const double rms = std::sqrt(squares / static_cast<double>(vector_length));
    for (std::size_t e = begin; e < begin + vector_length; ++e) {
      ++agreement.count;
      if (!std::isfinite(gpu[e])) {
        ++agreement.nonfinite;
        agreement.max_abs = INFINITY;
        agreement.max_ulps = INFINITY;
        continue;
      }
      const double delta =
          std::fabs(static_cast<double>(gpu[e]) - static_cast<double>(reference[e]));
      if (delta == 0.0) continue;
      ++agreement.differing;
      agreement.max_abs = std::max(agreement.max_abs, delta);
      const double magnitude = std::max(std::fabs(static_cast<double>(reference[e])), rms);
      agreement.max_ulps = std::max(agreement.max_ulps, delta / bf16_ulp(magnitude));
    }
  }
  return agreement;
}

void print_agreement(const std::string& label, const Agreement& agreement) {
  std::printf(
      "[agreement] %s: n=%zu max|delta|=%.3g max_ulps=%.3f differing=%zu (%.4f%%) "
      "nonfinite=%zu\n",
      label.c_str(), agreement.count, agreement.max_abs, agreement.max_ulps, agreement.differing,
      agreement.count == 0
          ? 0.0
          : 100.0 * static_cast<double>(agreement.differing) / static_cast<double>(agreement.count),
      agreement.nonfinite);
  std::fflush(stdout);
}

}  // namespace kvaudit::cuda::test
