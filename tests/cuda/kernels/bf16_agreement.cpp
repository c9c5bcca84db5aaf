// bf16 agreement statistics; see bf16_agreement.h.
#include "tests/cuda/kernels/bf16_agreement.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

#include "runners/model/bf16.h"

namespace kvaudit::cuda::test {
namespace {

// bf16 bits mapped to a signed integer that increases with the value (−0 and +0 both map to 0).
long ordered_bf16(float value) {
  const std::uint16_t bits = model::f32_to_bf16_bits(value);
  const long magnitude = static_cast<long>(bits & 0x7fffu);
  return (bits & 0x8000u) != 0 ? -magnitude : magnitude;
}

}  // namespace

long bf16_ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : 1L << 30;
  const long d = ordered_bf16(a) - ordered_bf16(b);
  return d < 0 ? -d : d;
}

Bf16Agreement compare_bf16(std::span<const float> expected, std::span<const float> actual) {
  if (expected.size() != actual.size()) {
    throw std::invalid_argument("compare_bf16: " + std::to_string(expected.size()) +
                                " expected values but " + std::to_string(actual.size()) +
                                " actual values");
  }
  Bf16Agreement agreement;
  agreement.count = expected.size();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const long ulps = bf16_ulp_distance(expected[i], actual[i]);
    if (ulps == 0) continue;
    ++agreement.differing;
    if (ulps > 1) ++agreement.beyond_one_ulp;
    agreement.max_ulps = std::max(agreement.max_ulps, ulps);
    const double difference =
        std::fabs(static_cast<double>(expected[i]) - static_cast<double>(actual[i]));
    if (!std::isnan(difference)) {
      agreement.max_abs_difference = std::max(agreement.max_abs_difference, difference);
    }
  }
  return agreement;
}

void print_agreement(const std::string& what, const Bf16Agreement& agreement) {
  std::printf("[agreement] %s: n=%zu, differing=%zu, >1 ulp=%zu, max|d|=%.6g, max ulps=%ld\n",
              what.c_str(), agreement.count, agreement.differing, agreement.beyond_one_ulp,
              agreement.max_abs_difference, agreement.max_ulps);
  std::fflush(stdout);
}

}  // namespace kvaudit::cuda::test
