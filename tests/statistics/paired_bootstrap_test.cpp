// The stratified paired bootstrap: the estimate and replicates against a direct re-computation
// from the documented index stream, invariance under the thread count, batch = single, common
// random numbers across comparisons, macro aggregation, the p-value formula, BCa (and its refusal
// on degenerate data), the quantile rule and input validation.
#include "statistics/paired_bootstrap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "statistics/rng.h"
#include "base/errors.h"
#include "tests/statistics/simulation_stream.h"

namespace kvaudit::stats {
namespace {

// A comparison of 0/1 (or, with `continuous`, [0, 1]) utilities over `strata` strata.
PairedComparison simulated(const std::string& name, const std::vector<std::uint32_t>& ids,
                           const std::vector<std::size_t>& sizes, std::uint32_t stream_id,
                           bool continuous = false) {
  testing::SimulationStream stream(5, stream_id);
  PairedComparison c;
  c.name = name;
  for (std::size_t s = 0; s < ids.size(); ++s) {
    PairedStratum stratum;
    stratum.id = ids[s];
    for (std::size_t i = 0; i < sizes[s]; ++i) {
      if (continuous) {
        stratum.arm_a.push_back(stream.uniform());
        stratum.arm_b.push_back(stream.uniform() * 0.9);
      } else {
        stratum.arm_a.push_back(stream.bernoulli(0.6) ? 1.0 : 0.0);
        stratum.arm_b.push_back(stream.bernoulli(0.5) ? 1.0 : 0.0);
      }
    }
    c.strata.push_back(std::move(stratum));
  }
  return c;
}

BootstrapOptions small_options(std::int64_t resamples = 2000) {
  BootstrapOptions options;
  options.resamples = resamples;
  options.seed = 99;
  options.keep_replicates = true;
  return options;
}

TEST(PairedBootstrap, ReplicatesFollowTheDocumentedIndexStream) {
  const PairedComparison c = simulated("gap", {3, 8}, {17, 10}, 1, /*continuous=*/true);
  const BootstrapResult r = paired_bootstrap(c, small_options(50));
  ASSERT_EQ(r.replicates.size(), 50u);
  EXPECT_FALSE(r.exact_integer);
  for (std::uint32_t b = 0; b < 50; ++b) {
    double total = 0;  // strata in ascending id order, instances in index order
    for (const auto& stratum : c.strata) {
      const auto n = static_cast<std::uint32_t>(stratum.arm_a.size());
      std::vector<std::uint32_t> idx(n);
      draw_resample_indices(99, stratum.id, b, RandomPurpose::bootstrap_index, n, idx.data());
      double sum = 0;
      for (std::uint32_t i : idx) sum += stratum.arm_a[i] - stratum.arm_b[i];
      total += sum;
    }
    EXPECT_EQ(r.replicates[b], total / 27) << "b = " << b;
  }
  double estimate = 0;
  double mean_a = 0;
  for (const auto& stratum : c.strata) {
    for (std::size_t i = 0; i < stratum.arm_a.size(); ++i) {
      estimate += stratum.arm_a[i] - stratum.arm_b[i];
      mean_a += stratum.arm_a[i];
    }
  }
  EXPECT_NEAR(r.estimate, estimate / 27, 1e-15);
  EXPECT_NEAR(r.mean_a, mean_a / 27, 1e-15);
  EXPECT_EQ(r.instances, 27);
  EXPECT_EQ(r.strata, 2);
}

TEST(PairedBootstrap, IntegerPathIsExact) {
  const PairedComparison c = simulated("gap", {0}, {101}, 2);
  const BootstrapResult r = paired_bootstrap(c, small_options(200));
  EXPECT_TRUE(r.exact_integer);
  for (double v : r.replicates) {
    const double numerator = v * 101;
    EXPECT_NEAR(numerator, std::round(numerator), 1e-9);
  }
}

TEST(PairedBootstrap, IdenticalForAnyThreadCount) {
  const std::vector<PairedComparison> batch = {simulated("a", {0, 1, 2}, {100, 100, 37}, 3),
                                               simulated("b", {0, 1, 2}, {100, 100, 37}, 4, true)};
  BootstrapOptions options = small_options(3001);
  std::vector<std::uint64_t> hashes;
  for (int threads : {1, 2, 3, 7}) {
    options.threads = threads;
    const auto results = paired_bootstrap_batch(batch, options);
    hashes.push_back(results[0].replicate_hash ^ (results[1].replicate_hash * 31));
    EXPECT_EQ(results[0].replicate_hash, replicate_hash(results[0].replicates));
  }
  for (std::uint64_t h : hashes) EXPECT_EQ(h, hashes.front());
}

TEST(PairedBootstrap, BatchEqualsSingleComparisonsAndPassesDoNotMatter) {
  const std::vector<PairedComparison> batch = {simulated("a", {0, 1}, {40, 60}, 5),
                                               simulated("b", {1}, {60}, 6, true),
                                               simulated("c", {2, 0}, {25, 40}, 7)};
  BootstrapOptions options = small_options(1500);
  options.threads = 2;
  const auto together = paired_bootstrap_batch(batch, options);
  options.comparisons_per_pass = 1;
  const auto one_per_pass = paired_bootstrap_batch(batch, options);
  for (std::size_t c = 0; c < batch.size(); ++c) {
    const BootstrapResult alone = paired_bootstrap(batch[c], options);
    EXPECT_EQ(together[c].name, batch[c].name);
    EXPECT_EQ(together[c].replicate_hash, alone.replicate_hash);
    EXPECT_EQ(one_per_pass[c].replicate_hash, alone.replicate_hash);
    EXPECT_EQ(together[c].lower, alone.lower);
    EXPECT_EQ(together[c].upper, alone.upper);
    EXPECT_EQ(together[c].p_value, alone.p_value);
  }
}

TEST(PairedBootstrap, CommonRandomNumbersAcrossComparisonsSharingAStratum) {
  // Two comparisons on stratum 4 (the second's differences shifted by +1) resample the same
  // instances, so their replicates differ by exactly the shift.
  PairedComparison first = simulated("x", {4}, {80}, 8);
  PairedComparison second = first;
  second.name = "y";
  for (auto& a : second.strata[0].arm_a) a += 1.0;  // d shifted by +1 everywhere
  const auto results = paired_bootstrap_batch({first, second}, small_options(500));
  for (std::size_t b = 0; b < 500; ++b) {
    EXPECT_NEAR(results[1].replicates[b], results[0].replicates[b] + 1.0, 1e-12) << b;
  }
  // A different stratum id gives different resamples of the same data.
  PairedComparison third = first;
  third.strata[0].id = 5;
  const BootstrapResult other = paired_bootstrap(third, small_options(500));
  EXPECT_NE(other.replicate_hash, results[0].replicate_hash);
}

TEST(PairedBootstrap, PValueAndPercentileFollowTheirFormulas) {
  const PairedComparison c = simulated("gap", {0, 1}, {50, 70}, 9, true);
  const BootstrapResult r = paired_bootstrap(c, small_options(4001));
  std::int64_t at_or_below = 0;
  for (double v : r.replicates) at_or_below += v <= 0 ? 1 : 0;
  EXPECT_EQ(r.at_or_below_zero, at_or_below);
  EXPECT_DOUBLE_EQ(r.p_value, (1.0 + static_cast<double>(at_or_below)) / 4002.0);
  std::vector<double> sorted = r.replicates;
  std::sort(sorted.begin(), sorted.end());
  // type 7 with B = 4001: h = 4000 q exactly at q = 0.025 → index 100; q = 0.975 → 3900.
  EXPECT_EQ(r.lower, sorted[100]);
  EXPECT_EQ(r.upper, sorted[3900]);
  EXPECT_LT(r.lower, r.estimate);
  EXPECT_GT(r.upper, r.estimate);
}

TEST(PairedBootstrap, TiesAtZeroCountAgainstTheClaim) {
  PairedComparison c;
  c.name = "all-equal";
  c.strata.push_back({0, std::vector<double>(30, 1.0), std::vector<double>(30, 1.0)});
  BootstrapOptions options = small_options(999);
  options.bca = true;
  const BootstrapResult r = paired_bootstrap(c, options);
  EXPECT_EQ(r.at_or_below_zero, 999);
  EXPECT_EQ(r.p_value, 1.0);
  EXPECT_EQ(r.lower, 0.0);
  EXPECT_EQ(r.upper, 0.0);
  EXPECT_FALSE(r.bca.has_value());
  EXPECT_NE(r.bca_unavailable.find("every paired difference is equal"), std::string::npos);
}

TEST(PairedBootstrap, MacroAggregateWeighsStrataEqually) {
  PairedComparison c;
  c.name = "macro";
  c.strata.push_back({0, std::vector<double>(10, 1.0), std::vector<double>(10, 0.0)});  // d = 1
  c.strata.push_back({1, std::vector<double>(90, 0.0), std::vector<double>(90, 0.0)});  // d = 0
  BootstrapOptions options = small_options(100);
  options.aggregate = Aggregate::macro;
  const BootstrapResult macro = paired_bootstrap(c, options);
  EXPECT_DOUBLE_EQ(macro.estimate, 0.5);
  EXPECT_DOUBLE_EQ(macro.mean_a, 0.5);
  for (double v : macro.replicates) EXPECT_DOUBLE_EQ(v, 0.5);  // constant within each stratum
  options.aggregate = Aggregate::pooled;
  const BootstrapResult pooled = paired_bootstrap(c, options);
  EXPECT_DOUBLE_EQ(pooled.estimate, 0.1);
  for (double v : pooled.replicates) EXPECT_DOUBLE_EQ(v, 0.1);
  EXPECT_STREQ(aggregate_name(Aggregate::macro), "macro");
}

TEST(PairedBootstrap, BcaIsComputedForRegularDataAndStaysNearThePercentileInterval) {
  const PairedComparison c = simulated("gap", {0}, {300}, 10, true);
  BootstrapOptions options = small_options(20000);
  options.bca = true;
  const BootstrapResult r = paired_bootstrap(c, options);
  ASSERT_TRUE(r.bca.has_value()) << r.bca_unavailable;
  EXPECT_TRUE(r.bca_unavailable.empty());
  const double width = r.upper - r.lower;
  EXPECT_NEAR(r.bca->lower, r.lower, 0.1 * width);
  EXPECT_NEAR(r.bca->upper, r.upper, 0.1 * width);
  EXPECT_LT(std::fabs(r.bca->acceleration), 0.05);
  EXPECT_LT(std::fabs(r.bca->bias_correction), 0.1);
}

TEST(PairedBootstrap, BcaRefusesASingletonStratumUnderMacroAggregation) {
  // The macro jackknife would have to delete the only instance of stratum 0.
  PairedComparison c;
  c.name = "singleton";
  c.strata.push_back({0, {1.0}, {0.0}});
  c.strata.push_back({1, {1.0, 0.0, 1.0}, {0.0, 0.0, 0.0}});
  BootstrapOptions options = small_options(100);
  options.bca = true;
  options.aggregate = Aggregate::macro;
  const BootstrapResult r = paired_bootstrap(c, options);
  EXPECT_FALSE(r.bca.has_value());
  EXPECT_NE(r.bca_unavailable.find("2 or more instances per stratum"), std::string::npos);
}

TEST(Quantile, Type7MatchesNumpyLinear) {
  const std::vector<double> v = {1, 2, 4, 8};
  EXPECT_DOUBLE_EQ(quantile_type7(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile_type7(v, 1.0), 8);
  EXPECT_DOUBLE_EQ(quantile_type7(v, 0.5), 3);      // numpy.quantile([1,2,4,8], 0.5)
  EXPECT_DOUBLE_EQ(quantile_type7(v, 0.25), 1.75);  // numpy: 1.75
  EXPECT_DOUBLE_EQ(quantile_type7(v, 0.9), 6.8);    // numpy: 6.8
  EXPECT_THROW(quantile_type7({}, 0.5), InputError);
  EXPECT_THROW(quantile_type7(v, 1.5), InputError);
}

TEST(ReplicateHash, IsFnv1aOverLittleEndianBytes) {
  EXPECT_EQ(replicate_hash({}), 0xcbf29ce484222325ull);
  // FNV-1a 64 of the 8 zero bytes of +0.0.
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < 8; ++i) h = (h ^ 0u) * 0x100000001b3ull;
  EXPECT_EQ(replicate_hash({0.0}), h);
  EXPECT_NE(replicate_hash({0.0}), replicate_hash({-0.0}));
  EXPECT_NE(replicate_hash({1.0, 2.0}), replicate_hash({2.0, 1.0}));
}

TEST(PairedBootstrap, RejectsBadInput) {
  const BootstrapOptions options = small_options(10);
  PairedComparison none{"none", {}};
  EXPECT_THROW(paired_bootstrap(none, options), InputError);
  PairedComparison ragged{"ragged", {{0, {1.0, 0.0}, {1.0}}}};
  try {
    paired_bootstrap(ragged, options);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("comparison 'ragged', stratum 0: arm A has 2 "
                                         "instances but arm B has 1"),
              std::string::npos)
        << e.what();
  }
  PairedComparison duplicate{"dup", {{0, {1.0}, {1.0}}, {0, {1.0}, {0.0}}}};
  EXPECT_THROW(paired_bootstrap(duplicate, options), InputError);
  PairedComparison empty{"empty", {{0, {}, {}}}};
  EXPECT_THROW(paired_bootstrap(empty, options), InputError);
  PairedComparison nan{"nan", {{0, {std::nan("")}, {1.0}}}};
  EXPECT_THROW(paired_bootstrap(nan, options), InputError);
  // The same stratum id with different sizes in one batch.
  PairedComparison a{"a", {{1, {1.0, 0.0}, {0.0, 0.0}}}};
  PairedComparison b{"b", {{1, {1.0}, {0.0}}}};
  EXPECT_THROW(paired_bootstrap_batch({a, b}, options), InputError);
  BootstrapOptions bad = options;
  bad.resamples = 0;
  EXPECT_THROW(paired_bootstrap(a, bad), InputError);
  bad = options;
  bad.confidence = 1.0;
  EXPECT_THROW(paired_bootstrap(a, bad), InputError);
  bad = options;
  bad.threads = -1;
  EXPECT_THROW(paired_bootstrap(a, bad), InputError);
  bad = options;
  bad.comparisons_per_pass = 0;
  EXPECT_THROW(paired_bootstrap(a, bad), InputError);
}

}  // namespace
}  // namespace kvaudit::stats
