// Validity and power of sequential calibration by simulation (docs/design/sequential.md §Validity
// by simulation; statistics/sequential_test.h).
//
// Global null: ten independent candidates whose population risk is ε (and, separately, 1.1·ε),
// ε = δ = 0.05, n_max = 1200, 10,000 trials per setting; any certification is false. Losses are
// violation indicators (Bernoulli(R)) or mean losses from Beta(1, b) with mean R = 1/(1 + b),
// drawn by inversion x = 1 − U^{1/b}. The sequential fixed sequence
// (sequential_fixed_sequence) must keep its false-certification rate ≤ δ + 3 SE. In the same
// trials the naive rule — after every request compute a fixed-n p-value on the requests so far
// and certify at the first p ≤ δ — must exceed δ + 3 SE, which shows the simulation detects an
// invalid procedure. The naive p-value is the LTT binomial p-value (binomial.h) for violations;
// for mean losses it is the one-sided z-test of the mean (from request 30 on), the usual fixed-n
// test of a mean, whose size at the fixed n = 1200 is also measured and is close to δ.
// The naive LTT rule is computed through K*(t, ε, δ) = max{K : p_t(K) ≤ δ}: p_t(K_t) ≤ δ iff
// K_t ≤ K*(t) (p is non-decreasing in K), which is the same rule without a tail per request.
//
// Power (printed for docs/PERFORMANCE.md, asserted only for sane relations): one candidate with
// violation rate 0.01 or 0.03 < ε = 0.05, n_max = 1200: the sequential test's certification rate
// and mean requests used, against the fixed-n LTT test at n = 1200 (simulated and exact).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "statistics/binomial.h"
#include "statistics/sequential_test.h"
#include "tests/statistics/simulation_stream.h"

namespace kvaudit::stats {
namespace {

constexpr int kTrials = 10000;
constexpr std::size_t kCandidates = 10;
constexpr std::int64_t kNMax = 1200;
constexpr double kEpsilon = 0.05;
constexpr double kDelta = 0.05;

enum class LossKind { violation, beta };

double draw_loss(testing::SimulationStream& stream, LossKind kind, double risk) {
  if (kind == LossKind::violation) return stream.bernoulli(risk) ? 1.0 : 0.0;
  const double b = 1.0 / risk - 1.0;  // Beta(1, b) has mean 1/(1 + b) = risk
  return 1.0 - std::pow(1.0 - stream.uniform(), 1.0 / b);
}

// K*(t, ε, δ) for t = 0..n_max (−1 where nothing certifies), for the naive LTT rule.
std::vector<std::int64_t> k_star_table() {
  std::vector<std::int64_t> table(static_cast<std::size_t>(kNMax) + 1, -1);
  for (std::int64_t t = 1; t <= kNMax; ++t) {
    table[static_cast<std::size_t>(t)] = max_certifiable_violations(t, kEpsilon, kDelta);
  }
  return table;
}

// Naive rule on one candidate's losses: the first t with p_t ≤ δ certifies. For violations p_t is
// the LTT binomial p-value; for mean losses the one-sided z-test p = Φ((x̄ − ε)/(s/√t)), t ≥ 30.
bool naive_certifies(const std::vector<double>& x, LossKind kind,
                     const std::vector<std::int64_t>& k_star) {
  double sum = 0, sum_sq = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sum += x[i];
    sum_sq += x[i] * x[i];
    const auto t = static_cast<std::int64_t>(i + 1);
    if (kind == LossKind::violation) {
      if (static_cast<std::int64_t>(sum + 0.5) <= k_star[static_cast<std::size_t>(t)]) return true;
    } else if (t >= 30) {
      const double n = static_cast<double>(t);
      const double mean = sum / n;
      const double var = (sum_sq - n * mean * mean) / (n - 1);
      const double z = (mean - kEpsilon) / std::sqrt(var / n);
      if (0.5 * std::erfc(-z / std::sqrt(2.0)) <= kDelta) return true;
    }
  }
  return false;
}

struct NullRates {
  double sequential = 0;     // false certifications of the sequential fixed sequence
  double naive = 0;          // the naive "test after every request" rule, fixed sequence
  double fixed_n = 0;        // the fixed-n test at n_max (same p-value as the naive rule)
  double mean_requests = 0;  // requests the sequential family needed, mean over trials
};

NullRates simulate_null(LossKind kind, double risk, std::uint64_t seed) {
  const auto k_star = k_star_table();
  std::vector<std::vector<double>> losses(kCandidates,
                                          std::vector<double>(static_cast<std::size_t>(kNMax)));
  int sequential_errors = 0, naive_errors = 0, fixed_n_errors = 0;
  double requests = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    for (std::size_t j = 0; j < kCandidates; ++j) {
      testing::SimulationStream stream(
          seed, static_cast<std::uint32_t>(static_cast<std::size_t>(trial) * kCandidates + j));
      for (auto& x : losses[j]) x = draw_loss(stream, kind, risk);
    }
    const auto r = sequential_fixed_sequence(losses, kEpsilon, kDelta, kNMax);
    if (r.selected.has_value()) ++sequential_errors;
    requests += static_cast<double>(r.requests_seen);
    // Fixed sequence with the naive rule: an error iff the first candidate is "certified".
    if (naive_certifies(losses[0], kind, k_star)) ++naive_errors;
    // The fixed-n test at n_max alone (first candidate), for reference.
    double sum = 0, sum_sq = 0;
    for (double x : losses[0]) {
      sum += x;
      sum_sq += x * x;
    }
    const double n = static_cast<double>(kNMax);
    if (kind == LossKind::violation) {
      if (static_cast<std::int64_t>(sum + 0.5) <= k_star.back()) ++fixed_n_errors;
    } else {
      const double mean = sum / n;
      const double z = (mean - kEpsilon) / std::sqrt((sum_sq - n * mean * mean) / (n - 1) / n);
      if (0.5 * std::erfc(-z / std::sqrt(2.0)) <= kDelta) ++fixed_n_errors;
    }
  }
  NullRates rates;
  rates.sequential = static_cast<double>(sequential_errors) / kTrials;
  rates.naive = static_cast<double>(naive_errors) / kTrials;
  rates.fixed_n = static_cast<double>(fixed_n_errors) / kTrials;
  rates.mean_requests = requests / kTrials;
  return rates;
}

void check_null(const char* name, LossKind kind, double risk, std::uint64_t seed) {
  const NullRates r = simulate_null(kind, risk, seed);
  const double se = std::sqrt(kDelta * (1 - kDelta) / kTrials);
  const double bound = kDelta + 3 * se;
  std::printf(
      "[%s] risk %.4f, %d trials, %zu candidates, n_max %lld: sequential FWER %.4f (bound %.4f, "
      "mean requests %.1f); naive after-every-request rule %.4f; fixed-n test at n_max %.4f\n",
      name, risk, kTrials, kCandidates, static_cast<long long>(kNMax), r.sequential, bound,
      r.mean_requests, r.naive, r.fixed_n);
  ::testing::Test::RecordProperty(std::string(name) + "_sequential_fwer",
                                  std::to_string(r.sequential));
  ::testing::Test::RecordProperty(std::string(name) + "_naive_fwer", std::to_string(r.naive));
  EXPECT_LE(r.sequential, bound) << name;
  EXPECT_GT(r.naive, bound) << name << ": the naive rule should fail";
}

TEST(SequentialFwer, ViolationLossesAtTheGlobalNull) {
  check_null("violation R=eps", LossKind::violation, kEpsilon, 1701);
}

TEST(SequentialFwer, ViolationLossesSlightlyAboveEpsilon) {
  check_null("violation R=1.1eps", LossKind::violation, 1.1 * kEpsilon, 1702);
}

TEST(SequentialFwer, BetaMeanLossesAtTheGlobalNull) {
  check_null("beta R=eps", LossKind::beta, kEpsilon, 1703);
}

TEST(SequentialFwer, BetaMeanLossesSlightlyAboveEpsilon) {
  check_null("beta R=1.1eps", LossKind::beta, 1.1 * kEpsilon, 1704);
}

struct Power {
  double sequential = 0;               // certification rate of the sequential test
  double mean_requests = 0;            // requests used, mean over all trials
  double mean_requests_certified = 0;  // ... over the trials that certified
  double fixed_n = 0;        // simulated certification rate of the fixed-n LTT test at n_max
  double fixed_n_exact = 0;  // P{Bin(n_max, rate) ≤ K*(n_max)}
};

Power simulate_power(LossKind kind, double rate, std::uint64_t seed) {
  const std::int64_t k_star = max_certifiable_violations(kNMax, kEpsilon, kDelta);
  Power p;
  int certified = 0, fixed = 0;
  double used = 0, used_certified = 0;
  std::vector<double> x(static_cast<std::size_t>(kNMax));
  for (int trial = 0; trial < kTrials; ++trial) {
    testing::SimulationStream stream(seed, static_cast<std::uint32_t>(trial));
    double sum = 0;
    for (auto& v : x) {
      v = draw_loss(stream, kind, rate);
      sum += v;
    }
    const SequentialOutcome o = replay_sequential(x, kEpsilon, kDelta, kNMax);
    used += static_cast<double>(o.requests_used);
    if (o.decision == SequentialDecision::certified) {
      ++certified;
      used_certified += static_cast<double>(o.requests_used);
    }
    if (kind == LossKind::violation && static_cast<std::int64_t>(sum + 0.5) <= k_star) ++fixed;
  }
  p.sequential = static_cast<double>(certified) / kTrials;
  p.mean_requests = used / kTrials;
  p.mean_requests_certified = certified > 0 ? used_certified / certified : 0.0;
  p.fixed_n = static_cast<double>(fixed) / kTrials;
  p.fixed_n_exact = binomial_cdf(kNMax, rate, k_star);
  return p;
}

TEST(SequentialPower, AgainstTheFixedNTestBelowEpsilon) {
  for (const double rate : {0.01, 0.03}) {
    const Power p = simulate_power(LossKind::violation, rate, 1800 + static_cast<int>(rate * 100));
    std::printf(
        "[power violation] eps %.2f delta %.2f n_max %lld rate %.2f: sequential power %.4f, mean "
        "requests used %.1f (%.1f when certified); fixed-n LTT at n_max power %.4f (exact %.4f), "
        "requests %lld\n",
        kEpsilon, kDelta, static_cast<long long>(kNMax), rate, p.sequential, p.mean_requests,
        p.mean_requests_certified, p.fixed_n, p.fixed_n_exact, static_cast<long long>(kNMax));
    ::testing::Test::RecordProperty("power_rate_" + std::to_string(rate),
                                    std::to_string(p.sequential));
    EXPECT_GT(p.sequential, 0.0);
    EXPECT_LE(p.mean_requests, static_cast<double>(kNMax));
    // The simulated fixed-n power agrees with the exact binomial value (within 4 SE).
    EXPECT_NEAR(p.fixed_n, p.fixed_n_exact,
                4 * std::sqrt(p.fixed_n_exact * (1 - p.fixed_n_exact) / kTrials) + 1e-12);
    if (rate == 0.01) {
      EXPECT_LT(p.mean_requests, static_cast<double>(kNMax));
    }
  }
  for (const double rate : {0.01, 0.03}) {
    const Power p = simulate_power(LossKind::beta, rate, 1900 + static_cast<int>(rate * 100));
    std::printf(
        "[power beta mean loss] eps %.2f delta %.2f n_max %lld mean %.2f: sequential power %.4f, "
        "mean requests used %.1f (%.1f when certified)\n",
        kEpsilon, kDelta, static_cast<long long>(kNMax), rate, p.sequential, p.mean_requests,
        p.mean_requests_certified);
    EXPECT_GT(p.sequential, 0.0);
  }
}

}  // namespace
}  // namespace kvaudit::stats
