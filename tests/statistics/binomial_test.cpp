// Binomial tails, the LTT p-value guard, K* (the seed paper's K* = 47 at n = 1200 and 51 at
// n = 1300, ε = δ = 0.05; the bisection against the old walk up the cdf; n = 1e10 and 2^53; n >
// 2^53 refused) and input validation. Golden tables are checked in golden_values_test.
#include "statistics/binomial.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

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

// The walk up the cdf that max_certifiable_violations used before the bisection (issue 16): the
// last K before the first p(K) > δ. Both must give the same K wherever the walk is affordable.
std::int64_t k_star_by_walk(std::int64_t n, double eps, double delta) {
  std::int64_t k_star = -1;
  for (std::int64_t k = 0; k <= violation_cap(n, eps) - 1; ++k) {
    if (binomial_cdf(n, eps, k) > delta) break;
    k_star = k;
  }
  return k_star;
}

TEST(KStar, BisectionGivesTheSameKAsTheWalkUpTheCdf) {
  std::size_t compared = 0;
  for (std::int64_t n = 1; n <= 300; ++n) {
    for (double eps : {0.01, 0.05, 0.1, 0.29, 0.5, 0.9}) {
      for (double delta : {0.001, 0.05, 0.5, 0.9}) {
        ASSERT_EQ(max_certifiable_violations(n, eps, delta), k_star_by_walk(n, eps, delta))
            << "n = " << n << ", epsilon = " << eps << ", delta = " << delta;
        ++compared;
      }
    }
  }
  for (std::int64_t n : {1000, 1199, 1200, 1201, 1300, 4321, 20000, 100000}) {
    for (double eps : {0.001, 0.05, 0.2, 0.57}) {
      for (double delta : {1e-6, 0.01, 0.05, 0.2}) {
        ASSERT_EQ(max_certifiable_violations(n, eps, delta), k_star_by_walk(n, eps, delta))
            << "n = " << n << ", epsilon = " << eps << ", delta = " << delta;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 7000u);
}

// The defining property of K* (or of "none") for the p-values as computed.
void expect_k_star_property(std::int64_t n, double eps, double delta) {
  const std::int64_t k = max_certifiable_violations(n, eps, delta);
  SCOPED_TRACE("n = " + std::to_string(n) + ", epsilon = " + std::to_string(eps) +
               ", delta = " + std::to_string(delta) + ", K* = " + std::to_string(k));
  ASSERT_GE(k, -1);
  ASSERT_LT(k, violation_cap(n, eps));
  if (k >= 0) {
    EXPECT_LE(ltt_p_value(n, eps, k), delta);
  }
  EXPECT_GT(ltt_p_value(n, eps, k + 1), delta);
  if (eps >= 0.01) {
    // Far from the Poisson regime K* sits at the normal quantile (within a few units).
    const double mean = static_cast<double>(n) * eps;
    const double sd = std::sqrt(mean * (1 - eps));
    const double z = delta == 0.05 ? 1.6448536269514722 : 4.753424308822899;  // δ = 1e-6
    EXPECT_NEAR(static_cast<double>(k), mean - z * sd, 1e-3 * sd + 3);
  }
}

TEST(KStar, AnswersAtTenToTheTenAndTwoToTheFiftyThree) {
  // The walk needed ~5e8 cdf evaluations at n = 1e10 (and the CLI's certify n bytes); the
  // bisection needs about 50 at n = 2^53.
  for (std::int64_t n : {std::int64_t{10'000'000'000}, kMaxTrials}) {
    for (double eps : {1e-9, 0.05, 0.1, 0.5}) {
      for (double delta : {1e-6, 0.05}) expect_k_star_property(n, eps, delta);
    }
  }
  EXPECT_EQ(max_certifiable_violations(10'000'000'000, 0.05, 0.05), 499964151);
}

TEST(KStar, RefusesNBeyondTwoToTheFiftyThree) {
  EXPECT_NO_THROW(ltt_p_value(kMaxTrials, 0.5, 0));
  for (std::int64_t n : {kMaxTrials + 1, std::numeric_limits<std::int64_t>::max()}) {
    try {
      max_certifiable_violations(n, 0.05, 0.05);
      FAIL() << "expected InputError for n = " << n;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("must be in [1, 2^53 = 9007199254740992]"),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW(ltt_p_value(n, 0.05, 0), InputError);
    EXPECT_THROW(violation_cap(n, 0.05), InputError);
    EXPECT_THROW(binomial_cdf(n, 0.05, 0), InputError);
    EXPECT_THROW(binomial_upper_tail(n, 0.05, 1), InputError);
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
