// Ideal-bootstrap oracle (docs/design/statistics.md §Tests of the implementation, item 3): for
// small paired 0/1 examples the exact
// B → ∞ distribution of Σd* is enumerated by tools/golden/make_statistics_golden.py (multinomial
// sums over the counts of d ∈ {−1, 0, 1}; strata convolved). With B = 50,000 the percentile
// interval must equal the exact one for every seed tried (the generator records how far each
// endpoint sits from a lattice jump; the test requires ≥ 7 Monte Carlo SE), and the one-sided
// p-value must lie within 4 Monte Carlo SE (+ the 1/(B+1) offset) of P{Δ* ≤ 0}. The n = 200
// example (lattice too fine for the interval check) tests the p-value only.
#include <gtest/gtest.h>

#include <cmath>

#include "statistics/paired_bootstrap.h"
#include "tests/statistics/golden_reader.h"

namespace kvaudit::stats {
namespace {

PairedComparison from_counts(const nlohmann::json& example) {
  PairedComparison c;
  c.name = example["name"].get<std::string>();
  std::uint32_t id = 0;
  for (const auto& s : example["strata"]) {
    PairedStratum stratum;
    stratum.id = id++;
    // d = +1: (1, 0); d = 0: (1, 1) and (0, 0) alternately; d = −1: (0, 1).
    for (int i = 0; i < s["plus"].get<int>(); ++i) {
      stratum.arm_a.push_back(1);
      stratum.arm_b.push_back(0);
    }
    for (int i = 0; i < s["zero"].get<int>(); ++i) {
      stratum.arm_a.push_back(i % 2);
      stratum.arm_b.push_back(i % 2);
    }
    for (int i = 0; i < s["minus"].get<int>(); ++i) {
      stratum.arm_a.push_back(0);
      stratum.arm_b.push_back(1);
    }
    c.strata.push_back(std::move(stratum));
  }
  return c;
}

TEST(IdealBootstrapOracle, PercentileIntervalAndPValueMatchTheExactDistribution) {
  constexpr std::int64_t kB = 50000;
  const double endpoint_se = std::sqrt(0.025 * 0.975 / kB);
  const auto& examples = testing::statistics_golden().at("ideal_bootstrap");
  ASSERT_GE(examples.size(), 3u);
  int intervals_checked = 0;
  for (const auto& example : examples) {
    const PairedComparison comparison = from_counts(example);
    const auto exact = example["percentile_95"].get<std::vector<double>>();
    const auto margins = example["lattice_margin"].get<std::vector<double>>();
    const bool check_interval = example["check_interval"].get<bool>();
    if (check_interval) {
      ASSERT_GE(margins[0], 7 * endpoint_se)
          << example["name"] << ": the golden example's lower endpoint is too close to a jump";
      ASSERT_GE(margins[1], 7 * endpoint_se) << example["name"];
    }
    const auto p_exact = example["p_at_or_below_zero"].get<double>();
    const double p_tolerance = 4 * std::sqrt(p_exact * (1 - p_exact) / kB) + 1.0 / (kB + 1);
    for (std::uint64_t seed : {1ull, 2ull, 3ull, 20240601ull, 0xdeadbeefcafef00dull}) {
      BootstrapOptions options;
      options.resamples = kB;
      options.seed = seed;
      const BootstrapResult r = paired_bootstrap(comparison, options);
      EXPECT_DOUBLE_EQ(r.estimate, example["estimate"].get<double>()) << example["name"];
      if (check_interval) {
        EXPECT_EQ(r.lower, exact[0]) << example["name"] << " seed " << seed;
        EXPECT_EQ(r.upper, exact[1]) << example["name"] << " seed " << seed;
        ++intervals_checked;
      }
      EXPECT_NEAR(r.p_value, p_exact, p_tolerance) << example["name"] << " seed " << seed;
    }
  }
  EXPECT_GE(intervals_checked, 15);
}

}  // namespace
}  // namespace kvaudit::stats
