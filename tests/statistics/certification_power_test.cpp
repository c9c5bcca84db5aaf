// Power and sample size of the binomial LTT test (statistics/certification_power.h) against
// tests/golden/statistics/risk_control_golden.json: K* from exact rational tails, power from an
// mpmath exact sum (cross-checked with scipy.stats.binom.cdf), to 1e-9 relative; the sample-size
// answers (first n, stable n) from a scipy scan of every n. Plus the incremental K* against
// max_certifiable_violations, the saw-tooth (power not monotone in n), and input errors.
#include "statistics/certification_power.h"

#include <gtest/gtest.h>

#include "base/errors.h"
#include "statistics/binomial.h"
#include "tests/statistics/golden_reader.h"
#include "tests/statistics/risk_control_golden.h"

namespace kvaudit::stats {
namespace {

using testing::relatively_close;
using testing::risk_control_golden;

TEST(CertificationPower, MatchesGolden) {
  std::size_t checked = 0;
  for (const auto& row : risk_control_golden().at("power")) {
    const auto n = row.at("n").get<std::int64_t>();
    const double eps = row.at("epsilon").get<double>();
    const double delta = row.at("delta").get<double>();
    const double rate = row.at("rate").get<double>();
    EXPECT_EQ(max_certifiable_violations(n, eps, delta), row.at("k_star").get<std::int64_t>());
    EXPECT_TRUE(relatively_close(certification_power(n, eps, delta, rate),
                                 row.at("power").get<double>(), 1e-9))
        << row.dump();
    ++checked;
  }
  EXPECT_GE(checked, 10u);
}

TEST(CertificationPower, AcceptanceExample) {
  // n = 1200, ε = δ = 0.05, true rate 3%: K* = 47, power = P{Bin(1200, 0.03) ≤ 47}.
  EXPECT_EQ(max_certifiable_violations(1200, 0.05, 0.05), 47);
  EXPECT_DOUBLE_EQ(certification_power(1200, 0.05, 0.05, 0.03), binomial_cdf(1200, 0.03, 47));
  // At the boundary rate the power is the test's size, ≤ δ.
  EXPECT_LE(certification_power(1200, 0.05, 0.05, 0.05), 0.05);
  // Nothing certifiable at n = 10 (K* = −1): power 0.
  EXPECT_EQ(certification_power(10, 0.05, 0.05, 0.0), 0.0);
}

TEST(CertificationPower, SampleSizeMatchesGolden) {
  std::size_t checked = 0;
  for (const auto& row : risk_control_golden().at("sample_size")) {
    const auto s = certification_sample_size(
        row.at("epsilon").get<double>(), row.at("delta").get<double>(),
        row.at("rate").get<double>(), row.at("target_power").get<double>(),
        row.at("n_max").get<std::int64_t>());
    EXPECT_EQ(s.found, row.at("found").get<bool>()) << row.dump();
    EXPECT_TRUE(relatively_close(s.power_at_n_max, row.at("power_at_n_max").get<double>(), 1e-9))
        << row.dump();
    if (s.found) {
      EXPECT_EQ(s.n, row.at("n").get<std::int64_t>()) << row.dump();
      EXPECT_EQ(s.k_star, row.at("k_star").get<std::int64_t>()) << row.dump();
      EXPECT_TRUE(relatively_close(s.power, row.at("power").get<double>(), 1e-9)) << row.dump();
    } else {
      EXPECT_EQ(s.n, 0);
    }
    EXPECT_EQ(s.stable_n, row.at("stable_n").get<std::int64_t>()) << row.dump();
    if (s.stable_n > 0) {
      EXPECT_EQ(s.stable_k_star, row.at("stable_k_star").get<std::int64_t>()) << row.dump();
      EXPECT_TRUE(relatively_close(s.stable_power, row.at("stable_power").get<double>(), 1e-9));
      EXPECT_GE(s.min_power_after, row.at("target_power").get<double>());
    }
    ++checked;
  }
  EXPECT_GE(checked, 5u);
}

TEST(CertificationPower, IncrementalKStarAndTheSawTooth) {
  // The scan's incremental K*(n) equals max_certifiable_violations at every n (checked through
  // the power it reports at n = first n, and directly here on a range), and the power curve
  // goes down somewhere between two K* steps.
  bool saw_a_drop = false;
  double previous = 0.0;
  for (std::int64_t n = 1; n <= 1500; ++n) {
    const double power = certification_power(n, 0.05, 0.05, 0.03);
    const auto scan = certification_sample_size(0.05, 0.05, 0.03, 0.999999999, n);
    EXPECT_DOUBLE_EQ(scan.power_at_n_max, power) << n;
    if (power < previous) saw_a_drop = true;
    previous = power;
    if (n > 200) n += 6;  // sparser above 200 (the scan is O(n) per call)
  }
  EXPECT_TRUE(saw_a_drop);
  const auto s = certification_sample_size(0.05, 0.05, 0.03, 0.8, 4000);
  ASSERT_TRUE(s.found);
  EXPECT_LT(s.n, s.stable_n);  // the first n that reaches 0.8 is not yet stable
  EXPECT_GE(s.power, 0.8);
  // stable_n − 1 is the last n below the target, and it comes after the first n that reached it.
  EXPECT_LT(certification_power(s.stable_n - 1, 0.05, 0.05, 0.03), 0.8);
}

TEST(CertificationPower, RefusesBadInput) {
  EXPECT_THROW(certification_power(0, 0.05, 0.05, 0.03), InputError);
  EXPECT_THROW(certification_power(-5, 0.05, 0.05, 0.03), InputError);
  EXPECT_THROW(certification_power(100, 0.0, 0.05, 0.03), InputError);
  EXPECT_THROW(certification_power(100, 0.05, 1.0, 0.03), InputError);
  EXPECT_THROW(certification_power(100, 0.05, 0.05, 1.5), InputError);
  EXPECT_THROW(certification_sample_size(0.05, 0.05, 0.05, 0.8, 1000), InputError);  // rate ≥ ε
  EXPECT_THROW(certification_sample_size(0.05, 0.05, 0.03, 1.0, 1000), InputError);
  EXPECT_THROW(certification_sample_size(0.05, 0.05, 0.03, 0.8, 0), InputError);
  EXPECT_THROW(certification_sample_size(0.05, 0.05, 0.03, 0.8, kMaxSampleSizeSearch + 1),
               InputError);
}

}  // namespace
}  // namespace kvaudit::stats
