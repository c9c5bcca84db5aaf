// Binomial tails, the LTT p-value guard, K* (the seed paper's K* = 47 at n = 1200 and 51 at
// n = 1300, ε = δ = 0.05) and input validation. Golden tables are checked in golden_values_test.
#include "statistics/binomial.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/errors.h"

namespace kvaudit::stats {
namespace {

TEST(KStar, SeedPaperValuesAtEpsilonDeltaFivePercent) {
  EXPECT_EQ(max_certifiable_violations(1200, 0.05, 0.05), 47);
  EXPECT_EQ(max_certifiable_violations(1300, 0.05, 0.05), 51);
}

TEST(KStar, IsTheLastKWhosePValueIsAtMostDelta) {
  for (std::int64_t n : {20, 59, 100, 1200, 10000}) {
    for (double eps : {0.01, 0.05, 0.1}) {
      for (double delta : {0.01, 0.05, 0.1}) {
        const std::int64_t k_star = max_certifiable_violations(n, eps, delta);
        if (k_star >= 0) {
          EXPECT_LE(ltt_p_value(n, eps, k_star), delta);
        }
        if (k_star + 1 <= n) {
          EXPECT_GT(ltt_p_value(n, eps, k_star + 1), delta);
        }
      }
    }
  }
}

TEST(KStar, NoneWhenEvenZeroViolationsCannotCertify) {
  // n = 20, ε = 0.05: P{Bin(20, 0.05) ≤ 0} = 0.95^20 = 0.358 > δ.
  EXPECT_EQ(max_certifiable_violations(20, 0.05, 0.05), -1);
  // n = 59 is the smallest n with 0.95^n ≤ 0.05.
  EXPECT_EQ(max_certifiable_violations(59, 0.05, 0.05), 0);
  EXPECT_EQ(max_certifiable_violations(58, 0.05, 0.05), -1);
}

TEST(LttPValue, GuardGivesOneFromTheFloorOfNEpsilon) {
  // ⌊nε⌋ = 60 for n = 1200, ε = 0.05: K = 59 is the last one with a binomial p-value.
  EXPECT_LT(ltt_p_value(1200, 0.05, 59), 1.0);
  EXPECT_DOUBLE_EQ(ltt_p_value(1200, 0.05, 59), binomial_cdf(1200, 0.05, 59));
  EXPECT_EQ(ltt_p_value(1200, 0.05, 60), 1.0);
  EXPECT_EQ(ltt_p_value(1200, 0.05, 1200), 1.0);
  // With a large δ the guard binds: P{Bin(20, 0.05) ≤ 0} = 0.358 ≤ 0.5 but ⌊nε⌋ − 1 = 0.
  EXPECT_EQ(max_certifiable_violations(20, 0.05, 0.5), 0);
  EXPECT_EQ(max_certifiable_violations(20, 0.1, 0.5), 1);
  EXPECT_GT(binomial_cdf(20, 0.1, 2), 0.5);
}

TEST(ViolationCap, SurvivesInexactProductsOfNAndEpsilon) {
  // 100 × 0.29 = 28.999999999999996 and 100 × 0.57 = 56.99999999999999 in IEEE double.
  EXPECT_EQ(violation_cap(100, 0.29), 29);
  EXPECT_EQ(violation_cap(100, 0.57), 57);
  EXPECT_EQ(violation_cap(1200, 0.05), 60);
  EXPECT_EQ(violation_cap(59, 0.05), 2);
}

TEST(BinomialTails, BoundaryValues) {
  EXPECT_EQ(binomial_cdf(10, 0.3, 10), 1.0);
  EXPECT_EQ(binomial_cdf(0, 0.3, 0), 1.0);
  EXPECT_DOUBLE_EQ(binomial_cdf(10, 0.5, 0), 1.0 / 1024);
  EXPECT_EQ(binomial_upper_tail(10, 0.5, 0), 1.0);
  EXPECT_DOUBLE_EQ(binomial_upper_tail(10, 0.5, 10), 1.0 / 1024);
  EXPECT_NEAR(binomial_upper_tail(30, 0.2, 7) + binomial_cdf(30, 0.2, 6), 1.0, 1e-15);
  EXPECT_EQ(binomial_cdf(10, 0.0, 0), 1.0);
  EXPECT_EQ(binomial_cdf(10, 1.0, 9), 0.0);
}

TEST(BinomialInputs, AreValidatedWithClearMessages) {
  EXPECT_THROW(binomial_cdf(-1, 0.5, 0), InputError);
  EXPECT_THROW(binomial_cdf(10, 0.5, 11), InputError);
  EXPECT_THROW(binomial_cdf(10, 0.5, -1), InputError);
  EXPECT_THROW(binomial_cdf(10, 1.5, 3), InputError);
  EXPECT_THROW(binomial_cdf(10, std::nan(""), 3), InputError);
  EXPECT_THROW(binomial_upper_tail(10, -0.1, 3), InputError);
  EXPECT_THROW(ltt_p_value(0, 0.05, 0), InputError);
  EXPECT_THROW(ltt_p_value(100, 0.0, 0), InputError);
  EXPECT_THROW(ltt_p_value(100, 1.0, 0), InputError);
  EXPECT_THROW(ltt_p_value(100, 0.05, 101), InputError);
  EXPECT_THROW(max_certifiable_violations(100, 0.05, 0.0), InputError);
  EXPECT_THROW(max_certifiable_violations(100, 0.05, 1.0), InputError);
  try {
    max_certifiable_violations(1200, 0.05, 1.5);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("delta must be in (0, 1), got 1.5"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvaudit::stats
