// Comparison helpers for the CPU backend's tests: the largest |a − b| relative to the largest |b|
// (a scale-aware max-abs error), and bf16-representability checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "runners/model/bf16.h"

namespace kvaudit::cpu::testing {

// max_i |actual_i − expected_i| / max_i |expected_i| (expected all zero: plain max |Δ|).
template <typename A, typename B>
double max_relative_error(std::span<const A> actual, std::span<const B> expected) {
  double max_diff = 0.0;
  double max_ref = 0.0;
  const std::size_t n = std::min(actual.size(), expected.size());
  for (std::size_t i = 0; i < n; ++i) {
    const double a = static_cast<double>(actual[i]);
    const double b = static_cast<double>(expected[i]);
    if (std::isnan(a) || std::isnan(b)) return INFINITY;
    max_diff = std::max(max_diff, std::abs(a - b));
    max_ref = std::max(max_ref, std::abs(b));
  }
  if (actual.size() != expected.size()) return INFINITY;
  return max_ref == 0.0 ? max_diff : max_diff / max_ref;
}

template <typename A, typename B>
double max_relative_error(const std::vector<A>& actual, const std::vector<B>& expected) {
  return max_relative_error(std::span<const A>(actual), std::span<const B>(expected));
}

inline bool all_bf16_representable(std::span<const float> values) {
  return std::all_of(values.begin(), values.end(),
                     [](float v) { return model::round_to_bf16(v) == v; });
}

}  // namespace kvaudit::cpu::testing
