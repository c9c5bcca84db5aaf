// Clopper–Pearson intervals: family name and m carried by every result, Bonferroni widening,
// boundary cases, the closed form at x = 0 / x = n, and input validation. Golden values are in
// golden_values_test.
#include "statistics/clopper_pearson.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/errors.h"

namespace kvaudit::stats {
namespace {

TEST(ClopperPearson, CarriesFamilyAndPerIntervalLevel) {
  const ProportionInterval interval = clopper_pearson_interval(29, 100, 0.05, {"accuracy", 13});
  EXPECT_EQ(interval.family, "accuracy");
  EXPECT_EQ(interval.m, 13);
  EXPECT_DOUBLE_EQ(interval.family_alpha, 0.05);
  EXPECT_DOUBLE_EQ(interval.per_interval_alpha, 0.05 / 13);
  EXPECT_DOUBLE_EQ(interval.estimate, 0.29);
  EXPECT_EQ(interval.successes, 29);
  EXPECT_EQ(interval.trials, 100);
  EXPECT_LT(interval.lower, 0.29);
  EXPECT_GT(interval.upper, 0.29);
}

TEST(ClopperPearson, BonferroniWidensTheInterval) {
  const auto one = clopper_pearson_interval(29, 100, 0.05, {"single", 1});
  const auto thirteen = clopper_pearson_interval(29, 100, 0.05, {"family", 13});
  const auto many = clopper_pearson_interval(29, 100, 0.05, {"family", 145});
  EXPECT_LT(thirteen.lower, one.lower);
  EXPECT_GT(thirteen.upper, one.upper);
  EXPECT_LT(many.lower, thirteen.lower);
  EXPECT_GT(many.upper, thirteen.upper);
  // An m-family interval at α is the single interval at α/m.
  const auto direct = clopper_pearson_interval(29, 100, 0.05 / 13, {"single", 1});
  EXPECT_EQ(thirteen.lower, direct.lower);
  EXPECT_EQ(thirteen.upper, direct.upper);
}

TEST(ClopperPearson, ClosedFormsAtTheBoundaries) {
  // x = 0: lower 0, upper 1 − (a/2)^(1/n); x = n: upper 1, lower (a/2)^(1/n).
  const auto zero = clopper_pearson_interval(0, 50, 0.05, {"f", 1});
  EXPECT_EQ(zero.lower, 0.0);
  EXPECT_NEAR(zero.upper, 1.0 - std::pow(0.025, 1.0 / 50), 1e-14);
  const auto all = clopper_pearson_interval(50, 50, 0.05, {"f", 1});
  EXPECT_EQ(all.upper, 1.0);
  EXPECT_NEAR(all.lower, std::pow(0.025, 1.0 / 50), 1e-14);
  // One-sided at x = 1: lower = 1 − (1 − a)^(1/n).
  EXPECT_NEAR(clopper_pearson_lower_bound(1, 100, 0.05), 1.0 - std::pow(0.95, 0.01), 1e-15);
  EXPECT_EQ(clopper_pearson_upper_bound(100, 100, 0.05), 1.0);
  EXPECT_EQ(clopper_pearson_lower_bound(0, 100, 0.05), 0.0);
}

TEST(ClopperPearson, OneSidedUpperBoundAgreesWithKStar) {
  // docs/design/statistics.md §The procedure: K ≤ K* ⇔ the one-sided (1 − δ) upper bound on the
  // rate is ≤ ε.
  EXPECT_LE(clopper_pearson_upper_bound(47, 1200, 0.05), 0.05);
  EXPECT_GT(clopper_pearson_upper_bound(48, 1200, 0.05), 0.05);
  EXPECT_LE(clopper_pearson_upper_bound(51, 1300, 0.05), 0.05);
  EXPECT_GT(clopper_pearson_upper_bound(52, 1300, 0.05), 0.05);
}

TEST(ClopperPearson, RejectsBadInput) {
  EXPECT_THROW(clopper_pearson_interval(1, 0, 0.05, {"f", 1}), InputError);
  EXPECT_THROW(clopper_pearson_interval(11, 10, 0.05, {"f", 1}), InputError);
  EXPECT_THROW(clopper_pearson_interval(-1, 10, 0.05, {"f", 1}), InputError);
  EXPECT_THROW(clopper_pearson_interval(1, 10, 0.0, {"f", 1}), InputError);
  EXPECT_THROW(clopper_pearson_interval(1, 10, 1.0, {"f", 1}), InputError);
  EXPECT_THROW(clopper_pearson_upper_bound(1, 10, std::nan("")), InputError);
  try {
    clopper_pearson_interval(1, 10, 0.05, {"accuracy", 0});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("family 'accuracy' must have m >= 1"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvaudit::stats
