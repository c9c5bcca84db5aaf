// The stratified paired cluster bootstrap (statistics/cluster_bootstrap.h): bit-identity with the
// per-instance bootstrap when every cluster has one instance, the replicates against a direct
// re-computation from the documented cluster draws, a two-cluster case worked out by hand,
// invariance under the thread count and the batch split, the leave-one-cluster-out BCa
// acceleration, input validation, and the acceptance test of the reuse protocol (issue 19): with a
// planted context-level random effect the cluster interval is wider than the per-question one by
// about √(1 + (m − 1)ρ).
#include "statistics/cluster_bootstrap.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "base/errors.h"
#include "statistics/paired_bootstrap.h"
#include "statistics/rng.h"
#include "tests/statistics/simulation_stream.h"

namespace kvaudit::stats {
namespace {

BootstrapOptions options_with(std::int64_t resamples, Aggregate aggregate = Aggregate::pooled) {
  BootstrapOptions options;
  options.resamples = resamples;
  options.seed = 2024;
  options.aggregate = aggregate;
  options.keep_replicates = true;
  options.threads = 2;
  return options;
}

// Per-instance data over strata `ids` of `sizes`: 0/1 utilities, or [0, 1] scores.
PairedComparison simulated(const std::string& name, const std::vector<std::uint32_t>& ids,
                           const std::vector<std::uint32_t>& sizes, std::uint32_t stream_id,
                           bool continuous) {
  testing::SimulationStream stream(17, stream_id);
  PairedComparison c;
  c.name = name;
  for (std::size_t s = 0; s < ids.size(); ++s) {
    PairedStratum stratum;
    stratum.id = ids[s];
    for (std::uint32_t i = 0; i < sizes[s]; ++i) {
      stratum.arm_a.push_back(continuous ? stream.uniform() : (stream.bernoulli(0.6) ? 1 : 0));
      stratum.arm_b.push_back(continuous ? stream.uniform() : (stream.bernoulli(0.5) ? 1 : 0));
    }
    c.strata.push_back(std::move(stratum));
  }
  return c;
}

// The same data with cluster ids given by cluster_of(stratum id, instance).
template <typename ClusterOf>
ClusteredPairedComparison with_clusters(const PairedComparison& c, ClusterOf cluster_of) {
  ClusteredPairedComparison out;
  out.name = c.name;
  for (const PairedStratum& s : c.strata) {
    ClusteredPairedStratum stratum{s.id, s.arm_a, s.arm_b, {}};
    for (std::uint32_t i = 0; i < s.arm_a.size(); ++i)
      stratum.cluster.push_back(cluster_of(s.id, i));
    out.strata.push_back(std::move(stratum));
  }
  return out;
}

void expect_identical(const BootstrapResult& cluster, const BootstrapResult& instance) {
  EXPECT_EQ(cluster.replicates, instance.replicates) << cluster.name;
  EXPECT_EQ(cluster.replicate_hash, instance.replicate_hash) << cluster.name;
  EXPECT_EQ(cluster.estimate, instance.estimate) << cluster.name;
  EXPECT_EQ(cluster.mean_a, instance.mean_a) << cluster.name;
  EXPECT_EQ(cluster.mean_b, instance.mean_b) << cluster.name;
  EXPECT_EQ(cluster.lower, instance.lower) << cluster.name;
  EXPECT_EQ(cluster.upper, instance.upper) << cluster.name;
  EXPECT_EQ(cluster.at_or_below_zero, instance.at_or_below_zero) << cluster.name;
  EXPECT_EQ(cluster.p_value, instance.p_value) << cluster.name;
  EXPECT_EQ(cluster.exact_integer, instance.exact_integer) << cluster.name;
  EXPECT_EQ(cluster.instances, instance.instances) << cluster.name;
  EXPECT_EQ(cluster.clusters, instance.instances) << cluster.name;
  ASSERT_EQ(cluster.bca.has_value(), instance.bca.has_value()) << cluster.name;
  if (cluster.bca) {
    EXPECT_EQ(cluster.bca->lower, instance.bca->lower) << cluster.name;
    EXPECT_EQ(cluster.bca->upper, instance.bca->upper) << cluster.name;
    EXPECT_EQ(cluster.bca->acceleration, instance.bca->acceleration) << cluster.name;
    EXPECT_EQ(cluster.bca->bias_correction, instance.bca->bias_correction) << cluster.name;
  }
}

TEST(ClusterBootstrap, SingletonClustersEqualThePerInstanceBootstrapBitForBit) {
  // Sizes cover the scalar (< 6) and AVX2 index paths and odd counts; cluster ids are distinct and
  // not in instance order (only the order of first appearance matters).
  const std::vector<PairedComparison> batch = {
      simulated("integer", {4, 1, 9}, {5, 40, 23}, 1, false),
      simulated("double", {4, 1, 9}, {5, 40, 23}, 2, true),
      simulated("integer, two strata", {1, 9}, {40, 23}, 3, false)};
  std::vector<ClusteredPairedComparison> clustered;
  for (const auto& c : batch) {
    clustered.push_back(
        with_clusters(c, [](std::uint32_t, std::uint32_t i) { return 1000 - 7 * i; }));
  }
  for (const Aggregate aggregate : {Aggregate::pooled, Aggregate::macro}) {
    BootstrapOptions options = options_with(3001, aggregate);
    options.bca = true;
    const auto instance = paired_bootstrap_batch(batch, options);
    const auto cluster = cluster_paired_bootstrap_batch(clustered, options);
    ASSERT_EQ(cluster.size(), instance.size());
    for (std::size_t c = 0; c < cluster.size(); ++c) {
      SCOPED_TRACE(aggregate_name(aggregate));
      ASSERT_TRUE(instance[c].bca.has_value()) << instance[c].bca_unavailable;
      expect_identical(cluster[c], instance[c]);
    }
  }
}

TEST(ClusterBootstrap, ReplicatesFollowTheDocumentedClusterDraws) {
  // Stratum 8: 11 instances in 4 clusters of sizes 4, 3, 1, 3 (ids 5, 2, 9, 7; not adjacent);
  // stratum 3: 9 instances in 9 / 3 = 3 clusters of 3.
  const PairedComparison base = simulated("gap", {8, 3}, {11, 9}, 4, true);
  const std::vector<std::uint32_t> stratum8 = {5, 2, 5, 9, 2, 7, 5, 7, 2, 7, 5};
  const ClusteredPairedComparison c = with_clusters(
      base, [&](std::uint32_t id, std::uint32_t i) { return id == 8 ? stratum8[i] : i / 3; });
  for (const Aggregate aggregate : {Aggregate::pooled, Aggregate::macro}) {
    const BootstrapResult r = cluster_paired_bootstrap(c, options_with(64, aggregate));
    ASSERT_EQ(r.replicates.size(), 64u);
    EXPECT_EQ(r.clusters, 7);
    EXPECT_EQ(r.instances, 20);
    for (std::uint32_t b = 0; b < 64; ++b) {
      double pooled_sum = 0;
      double drawn = 0;
      double macro_sum = 0;
      for (const std::uint32_t id : {3u, 8u}) {  // ascending stratum id
        const ClusteredPairedStratum& s = c.strata[id == 8 ? 0 : 1];
        // Clusters in order of first appearance, with their sums (instance order) and sizes.
        std::vector<std::uint32_t> order;
        std::vector<double> sums;
        std::vector<double> sizes;
        for (std::size_t i = 0; i < s.cluster.size(); ++i) {
          std::size_t k = 0;
          while (k < order.size() && order[k] != s.cluster[i]) ++k;
          if (k == order.size()) {
            order.push_back(s.cluster[i]);
            sums.push_back(0);
            sizes.push_back(0);
          }
          sums[k] += s.arm_a[i] - s.arm_b[i];
          sizes[k] += 1;
        }
        const auto clusters = static_cast<std::uint32_t>(order.size());
        std::vector<std::uint32_t> idx(clusters);
        draw_resample_indices(2024, id, b, RandomPurpose::bootstrap_index, clusters, idx.data());
        double sum = 0;
        double n = 0;
        for (const std::uint32_t k : idx) {
          sum += sums[k];
          n += sizes[k];
        }
        pooled_sum += sum;
        drawn += n;
        macro_sum += sum / n;
      }
      const double expected = aggregate == Aggregate::pooled ? pooled_sum / drawn : macro_sum / 2;
      EXPECT_EQ(r.replicates[b], expected) << aggregate_name(aggregate) << " b = " << b;
    }
  }
}

TEST(ClusterBootstrap, TwoClustersWorkedOutByHand) {
  // One stratum, instances (cluster, d): (7, 1) (3, 0) (7, 1) (7, 1). Clusters by first
  // appearance: k0 = id 7 (n = 3, S = 3), k1 = id 3 (n = 1, S = 0). Estimate 3/4. A replicate draws
  // two clusters: {k0, k0} → 6/6 = 1 (prob 1/4), {k1, k1} → 0/2 = 0 (1/4), mixed → 3/4 (1/2).
  // The per-instance bootstrap on the same data would also give 1/4 and 1/2.
  ClusteredPairedComparison c{"hand", {{0, {1, 0, 1, 1}, {0, 0, 0, 0}, {7, 3, 7, 7}}}};
  const BootstrapResult r = cluster_paired_bootstrap(c, options_with(4000));
  EXPECT_EQ(r.estimate, 0.75);
  EXPECT_EQ(r.mean_a, 0.75);
  EXPECT_EQ(r.mean_b, 0.0);
  EXPECT_EQ(r.clusters, 2);
  EXPECT_EQ(r.instances, 4);
  EXPECT_TRUE(r.exact_integer);
  std::int64_t ones = 0, zeros = 0, mixed = 0;
  for (std::uint32_t b = 0; b < r.replicates.size(); ++b) {
    std::uint32_t idx[2];
    draw_resample_indices(2024, 0, b, RandomPurpose::bootstrap_index, 2, idx);
    const double expected = idx[0] == idx[1] ? (idx[0] == 0 ? 1.0 : 0.0) : 0.75;
    ASSERT_EQ(r.replicates[b], expected) << "b = " << b;
    ones += expected == 1.0;
    zeros += expected == 0.0;
    mixed += expected == 0.75;
  }
  EXPECT_NEAR(static_cast<double>(ones) / 4000, 0.25, 0.03);
  EXPECT_NEAR(static_cast<double>(zeros) / 4000, 0.25, 0.03);
  EXPECT_NEAR(static_cast<double>(mixed) / 4000, 0.5, 0.03);
  // 95% percentile interval of a distribution with 1/4 mass at each end: [0, 1].
  EXPECT_EQ(r.lower, 0.0);
  EXPECT_EQ(r.upper, 1.0);
  EXPECT_EQ(r.at_or_below_zero, zeros);
  EXPECT_EQ(r.p_value, (1.0 + static_cast<double>(zeros)) / 4001.0);
}

TEST(ClusterBootstrap, IdenticalForAnyThreadCountAndBatchSplit) {
  std::vector<ClusteredPairedComparison> batch;
  for (std::uint32_t k = 0; k < 4; ++k) {
    batch.push_back(
        with_clusters(simulated("c" + std::to_string(k), {2, 5}, {30, 17}, 10 + k, k % 2 == 1),
                      [](std::uint32_t, std::uint32_t i) { return i / 4; }));
  }
  BootstrapOptions options = options_with(5003);
  options.threads = 1;
  const auto reference = cluster_paired_bootstrap_batch(batch, options);
  for (const int threads : {2, 3, 7}) {
    options.threads = threads;
    options.comparisons_per_pass = static_cast<std::size_t>(threads - 1);
    const auto results = cluster_paired_bootstrap_batch(batch, options);
    for (std::size_t c = 0; c < batch.size(); ++c) {
      EXPECT_EQ(results[c].replicate_hash, reference[c].replicate_hash) << threads << " threads";
      EXPECT_EQ(results[c].lower, reference[c].lower);
      EXPECT_EQ(results[c].upper, reference[c].upper);
    }
  }
  for (std::size_t c = 0; c < batch.size(); ++c) {  // batch = each comparison alone
    options.threads = 2;
    EXPECT_EQ(cluster_paired_bootstrap(batch[c], options).replicate_hash,
              reference[c].replicate_hash);
  }
}

TEST(ClusterBootstrap, BcaAccelerationComesFromTheLeaveOneClusterOutJackknife) {
  const ClusteredPairedComparison c = with_clusters(
      simulated("bca", {0}, {60}, 20, true), [](std::uint32_t, std::uint32_t i) { return i % 13; });
  BootstrapOptions options = options_with(4000);
  options.bca = true;
  const BootstrapResult r = cluster_paired_bootstrap(c, options);
  ASSERT_TRUE(r.bca.has_value()) << r.bca_unavailable;
  // Jackknife over the 13 clusters: θ_(k) = (ΣS − S_k) / (N − n_k); a = Σu³ / (6 (Σu²)^1.5) with
  // u = mean(θ) − θ_(k).
  std::vector<double> sums(13, 0.0), sizes(13, 0.0);
  double total = 0;
  for (std::uint32_t i = 0; i < 60; ++i) {
    const double d = c.strata[0].arm_a[i] - c.strata[0].arm_b[i];
    sums[i % 13] += d;
    sizes[i % 13] += 1;
    total += d;
  }
  std::vector<double> theta;
  double mean = 0;
  for (int k = 0; k < 13; ++k) {
    theta.push_back((total - sums[k]) / (60 - sizes[k]));
    mean += theta.back() / 13;
  }
  double squares = 0, cubes = 0;
  for (const double t : theta) {
    squares += (mean - t) * (mean - t);
    cubes += (mean - t) * (mean - t) * (mean - t);
  }
  EXPECT_NEAR(r.bca->acceleration, cubes / (6 * std::pow(squares, 1.5)), 1e-12);
  EXPECT_LE(r.bca->lower, r.bca->upper);

  // One cluster: no jackknife.
  const ClusteredPairedComparison single{"one context", {{0, {1, 0, 1}, {0, 0, 0}, {4, 4, 4}}}};
  const BootstrapResult refused = cluster_paired_bootstrap(single, options);
  EXPECT_FALSE(refused.bca.has_value());
  EXPECT_EQ(refused.bca_unavailable, "BCa undefined: the jackknife needs 2 or more clusters");
}

// The acceptance test of the reuse protocol's reduce (issue 19): K = 40 contexts × m = 4 questions,
// d = u_context + e_question with u ~ N(0, ρ), e ~ N(0, 1 − ρ), ρ = 0.5, so the intra-context
// correlation of d is ρ. The per-question bootstrap's variance is ≈ σ²/N; the cluster bootstrap's
// ≈ σ²(1 + (m − 1)ρ)/N (design effect), so the width ratio is ≈ √(1 + 3·0.5) = √2.5 ≈ 1.58 (times
// √((K−1)/K · N/(N−1)) ≈ 0.99 for the bootstrap's plug-in variances).
TEST(ClusterBootstrap, WiderThanThePerQuestionBootstrapUnderPlantedContextCorrelation) {
  constexpr std::uint32_t kContexts = 40;
  constexpr std::uint32_t kQuestions = 4;
  constexpr double kRho = 0.5;
  const double expected_ratio = std::sqrt(1 + (kQuestions - 1) * kRho);
  const auto dataset = [&](std::uint32_t stream_id) {
    testing::SimulationStream stream(77, stream_id);
    const auto normal = [&] {  // Box–Muller
      const double u1 = stream.uniform();
      const double u2 = stream.uniform();
      return std::sqrt(-2 * std::log(1 - u1)) * std::cos(2 * std::numbers::pi * u2);
    };
    ClusteredPairedStratum s{0, {}, {}, {}};
    for (std::uint32_t k = 0; k < kContexts; ++k) {
      const double context_effect = std::sqrt(kRho) * normal();
      for (std::uint32_t q = 0; q < kQuestions; ++q) {
        s.arm_a.push_back(0.1 + context_effect + std::sqrt(1 - kRho) * normal());
        s.arm_b.push_back(0.0);
        s.cluster.push_back(k);
      }
    }
    return s;
  };
  const auto width_ratio = [&](const ClusteredPairedStratum& s) {
    BootstrapOptions options = options_with(4000);
    options.keep_replicates = false;
    const BootstrapResult cluster = cluster_paired_bootstrap({"cluster", {s}}, options);
    const BootstrapResult naive = paired_bootstrap({"naive", {{s.id, s.arm_a, s.arm_b}}}, options);
    EXPECT_EQ(cluster.estimate, naive.estimate);  // the clusters change the interval only
    return (cluster.upper - cluster.lower) / (naive.upper - naive.lower);
  };
  // One fixed data set: wider by a stated margin (≥ 1.3×; the expectation is 1.58×).
  const double ratio = width_ratio(dataset(0));
  std::printf("[reuse] cluster/naive 95%% width ratio %.3f (expected ≈ %.3f)\n", ratio,
              expected_ratio);
  EXPECT_GE(ratio, 1.3);
  EXPECT_NEAR(ratio, expected_ratio, 0.25 * expected_ratio);
  // Averaged over 20 data sets the ratio is close to √(1 + (m − 1)ρ).
  double mean_ratio = 0;
  for (std::uint32_t d = 1; d <= 20; ++d) mean_ratio += width_ratio(dataset(d)) / 20;
  std::printf("[reuse] mean width ratio over 20 data sets %.3f\n", mean_ratio);
  EXPECT_NEAR(mean_ratio, expected_ratio, 0.1 * expected_ratio);
}

// The same with 0/1 outcomes (the integer path): arm A's success probability is 0.85 or 0.15 per
// context (half each), arm B's 0.5 independently. Var(d) = 0.25 + 0.25, within-context covariance
// Var(p) = 0.35², ρ = 0.1225 / 0.5 = 0.245, expected ratio √(1 + 3·0.245) ≈ 1.32; per-question
// instances (m = 1) would give 1.
TEST(ClusterBootstrap, WiderUnderPlantedContextCorrelationWithBinaryOutcomes) {
  testing::SimulationStream stream(78, 0);
  ClusteredPairedStratum s{3, {}, {}, {}};
  for (std::uint32_t k = 0; k < 60; ++k) {
    const double p = stream.bernoulli(0.5) ? 0.85 : 0.15;
    for (std::uint32_t q = 0; q < 4; ++q) {
      s.arm_a.push_back(stream.bernoulli(p) ? 1 : 0);
      s.arm_b.push_back(stream.bernoulli(0.5) ? 1 : 0);
      s.cluster.push_back(k);
    }
  }
  BootstrapOptions options = options_with(4000);
  const BootstrapResult cluster = cluster_paired_bootstrap({"cluster", {s}}, options);
  const BootstrapResult naive = paired_bootstrap({"naive", {{s.id, s.arm_a, s.arm_b}}}, options);
  ASSERT_TRUE(cluster.exact_integer);
  const double ratio = (cluster.upper - cluster.lower) / (naive.upper - naive.lower);
  std::printf("[reuse] binary outcomes: width ratio %.3f (expected ≈ 1.32)\n", ratio);
  EXPECT_GE(ratio, 1.15);
  EXPECT_NEAR(ratio, std::sqrt(1 + 3 * 0.245), 0.2);
}

TEST(ClusterBootstrap, RejectsBadInput) {
  const BootstrapOptions options = options_with(10);
  const auto message = [&](const std::vector<ClusteredPairedComparison>& batch) -> std::string {
    try {
      cluster_paired_bootstrap_batch(batch, options);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message({{"x", {{0, {1, 0}, {0, 0}, {1}}}}}).find("2 instances but 1 cluster ids"),
            std::string::npos);
  EXPECT_NE(message({{"x", {}}}).find("no strata"), std::string::npos);
  EXPECT_NE(message({{"x", {{0, {}, {}, {}}}}}).find("no instances"), std::string::npos);
  EXPECT_NE(message({{"x", {{0, {1}, {0}, {1}}, {0, {1}, {0}, {1}}}}}).find("appears twice"),
            std::string::npos);
  EXPECT_NE(message({{"x", {{0, {NAN}, {0}, {1}}}}}).find("not finite"), std::string::npos);
  EXPECT_NE(message({{"x", {{0, {1, 0}, {0}, {1, 1}}}}}).find("arm B has 1"), std::string::npos);
  // Stratum 0 has clusters of sizes {2} in one comparison and {1, 1} in the other.
  EXPECT_NE(message({{"x", {{0, {1, 0}, {0, 0}, {5, 5}}}}, {"y", {{0, {1, 0}, {0, 0}, {5, 6}}}}})
                .find("differ from those of comparison 'x'"),
            std::string::npos);
  BootstrapOptions bad = options;
  bad.resamples = 0;
  EXPECT_THROW(cluster_paired_bootstrap({"x", {{0, {1}, {0}, {1}}}}, bad), InputError);
  bad = options;
  bad.confidence = 1.0;
  EXPECT_THROW(cluster_paired_bootstrap({"x", {{0, {1}, {0}, {1}}}}, bad), InputError);
}

}  // namespace
}  // namespace kvaudit::stats
