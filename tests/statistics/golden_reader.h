// Loads tests/golden/statistics/statistics_golden.json (written by
// tools/golden/make_statistics_golden.py) and compares doubles to a relative tolerance.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <string>

namespace kvaudit::stats::testing {

inline const nlohmann::json& statistics_golden() {
  static const nlohmann::json golden = [] {
    std::ifstream in(KVAUDIT_STATISTICS_GOLDEN);
    if (!in) throw std::runtime_error("cannot open " + std::string(KVAUDIT_STATISTICS_GOLDEN));
    return nlohmann::json::parse(in);
  }();
  return golden;
}

// |actual − expected| ≤ tolerance · max(|actual|, |expected|); equal values (zeros included) pass.
inline ::testing::AssertionResult relatively_close(double actual, double expected,
                                                   double tolerance) {
  if (actual == expected) return ::testing::AssertionSuccess();
  const double scale = std::max(std::fabs(actual), std::fabs(expected));
  const double error = std::fabs(actual - expected) / scale;
  if (error <= tolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "actual " << std::setprecision(17) << actual
                                       << " expected " << expected << " relative error " << error;
}

}  // namespace kvaudit::stats::testing
