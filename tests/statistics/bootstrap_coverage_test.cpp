// Coverage of the 95% percentile interval (docs/design/statistics.md §Tests of the implementation,
// item 4): 1,000 simulated datasets at
// n = 100 paired instances; the share of intervals containing the true Δ must be 0.95 ± 0.021
// (3 binomial SE at 1,000 datasets).
//
// B = 2,000 per dataset instead of 50,000, to keep the test under a few seconds with sanitizers:
// coverage is a property of the B → ∞ interval, and at B = 2,000 the Monte Carlo SD of a 2.5%
// endpoint is √(0.025·0.975/2000)/φ(1.96) ≈ 0.06 statistical SE, which moves coverage by well under
// 0.005 — small against the ±0.021 tolerance. The full-size variant (B = 50,000) carries label
// `slow` (StatisticsSlow.*).
#include <gtest/gtest.h>

#include <cmath>

#include "statistics/paired_bootstrap.h"
#include "tests/statistics/simulation_stream.h"

namespace kvaudit::stats {
namespace {

constexpr int kDatasets = 1000;
constexpr int kInstances = 100;

// Paired 0/1 outcomes with P(d = +1) = 0.25, P(d = −1) = 0.15, P(d = 0) = 0.60: Δ = 0.10.
std::vector<PairedComparison> binary_datasets(std::uint64_t seed) {
  std::vector<PairedComparison> datasets;
  for (int k = 0; k < kDatasets; ++k) {
    testing::SimulationStream stream(seed, static_cast<std::uint32_t>(k));
    PairedStratum stratum;
    stratum.id = static_cast<std::uint32_t>(k);  // own stratum: datasets do not share resamples
    for (int i = 0; i < kInstances; ++i) {
      const double u = stream.uniform();
      const bool both = stream.bernoulli(0.5);
      if (u < 0.25) {
        stratum.arm_a.push_back(1), stratum.arm_b.push_back(0);
      } else if (u < 0.40) {
        stratum.arm_a.push_back(0), stratum.arm_b.push_back(1);
      } else {
        stratum.arm_a.push_back(both), stratum.arm_b.push_back(both);
      }
    }
    datasets.push_back({"dataset " + std::to_string(k), {std::move(stratum)}});
  }
  return datasets;
}

// Continuous utilities: a ~ U(0,1), b = a·v with v ~ U(0,1): Δ = E[a](1 − E[v]) = 0.25 (skewed d).
std::vector<PairedComparison> continuous_datasets(std::uint64_t seed) {
  std::vector<PairedComparison> datasets;
  for (int k = 0; k < kDatasets; ++k) {
    testing::SimulationStream stream(seed, static_cast<std::uint32_t>(k));
    PairedStratum stratum;
    stratum.id = static_cast<std::uint32_t>(k);
    for (int i = 0; i < kInstances; ++i) {
      const double a = stream.uniform();
      stratum.arm_a.push_back(a);
      stratum.arm_b.push_back(a * stream.uniform());
    }
    datasets.push_back({"dataset " + std::to_string(k), {std::move(stratum)}});
  }
  return datasets;
}

double coverage(const std::vector<PairedComparison>& datasets, double truth, std::int64_t b) {
  BootstrapOptions options;
  options.resamples = b;
  options.seed = 11;
  int covered = 0;
  for (const BootstrapResult& r : paired_bootstrap_batch(datasets, options)) {
    covered += (r.lower <= truth && truth <= r.upper) ? 1 : 0;
  }
  return static_cast<double>(covered) / kDatasets;
}

TEST(BootstrapCoverage, BinaryOutcomesAtNOneHundred) {
  const double c = coverage(binary_datasets(1), 0.10, 2000);
  std::printf("coverage (0/1 data, n = 100, B = 2000): %.3f\n", c);
  RecordProperty("coverage", std::to_string(c));
  EXPECT_NEAR(c, 0.95, 0.021);
}

TEST(BootstrapCoverage, ContinuousOutcomesAtNOneHundred) {
  const double c = coverage(continuous_datasets(2), 0.25, 2000);
  std::printf("coverage (continuous data, n = 100, B = 2000): %.3f\n", c);
  RecordProperty("coverage", std::to_string(c));
  EXPECT_NEAR(c, 0.95, 0.021);
}

TEST(StatisticsSlow, CoverageWithFullSizeBootstrap) {
  const double c = coverage(binary_datasets(3), 0.10, 50000);
  std::printf("coverage (0/1 data, n = 100, B = 50000): %.3f\n", c);
  RecordProperty("coverage", std::to_string(c));
  EXPECT_NEAR(c, 0.95, 0.021);
}

}  // namespace
}  // namespace kvaudit::stats
