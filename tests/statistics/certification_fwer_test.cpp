// Family-wise error of the certification at the global null (docs/design/statistics.md §Why no
// multiplicity correction, §Tests of the implementation, item 6):
// ten independent candidates, every one with population violation rate R = ε, n = 1200,
// ε = δ = 0.05. Any certification is false. The fixed-sequence rate must be ≤ δ + 3 Monte Carlo
// SE and match the exact size P{Bin(1200, 0.05) ≤ K*} = P{Bin ≤ 47} within 4 SE; the naive
// "most aggressive certified candidate, no stopping" rule must blow through δ (≈ 0.37), which
// shows the simulation can detect an invalid procedure.
#include <gtest/gtest.h>

#include <cmath>

#include "statistics/binomial.h"
#include "statistics/certification.h"
#include "tests/statistics/simulation_stream.h"

namespace kvaudit::stats {
namespace {

TEST(CertificationFwer, FalseCertificationRateAtTheGlobalNullIsAtMostDelta) {
  constexpr int kTrials = 10000;
  constexpr std::size_t kCandidates = 10;
  constexpr std::size_t kN = 1200;
  const Contract contract{0.0, 0.05, 0.05};
  int fixed_sequence_errors = 0;
  int naive_errors = 0;
  CertificationInput input;
  input.name = "fwer-simulation";
  input.contract = contract;
  input.candidates.resize(kCandidates);
  for (std::size_t j = 0; j < kCandidates; ++j) {
    input.candidates[j].id = "c" + std::to_string(j);
    input.candidates[j].calibration_violations.resize(kN);
  }
  for (int trial = 0; trial < kTrials; ++trial) {
    testing::SimulationStream stream(77, static_cast<std::uint32_t>(trial));
    for (auto& candidate : input.candidates) {
      for (auto& v : candidate.calibration_violations) {
        v = stream.bernoulli(contract.epsilon) ? 1 : 0;
      }
    }
    const CertificationResult r = certify(input);
    if (r.selected.has_value()) ++fixed_sequence_errors;
    bool any_p_below_delta = false;
    for (const auto& c : r.candidates) any_p_below_delta |= c.p_value <= contract.delta;
    if (any_p_below_delta) ++naive_errors;
  }
  const double rate = static_cast<double>(fixed_sequence_errors) / kTrials;
  const double naive_rate = static_cast<double>(naive_errors) / kTrials;
  const double exact_size = binomial_cdf(1200, 0.05, max_certifiable_violations(1200, 0.05, 0.05));
  const double se = std::sqrt(contract.delta * (1 - contract.delta) / kTrials);
  RecordProperty("false_certification_rate", std::to_string(rate));
  RecordProperty("naive_rate", std::to_string(naive_rate));
  RecordProperty("exact_size", std::to_string(exact_size));
  std::printf(
      "fixed-sequence false-certification rate %.4f (exact size %.5f, bound %.4f); naive "
      "rule %.4f\n",
      rate, exact_size, contract.delta + 3 * se, naive_rate);
  EXPECT_LE(rate, contract.delta + 3 * se);
  EXPECT_NEAR(rate, exact_size, 4 * std::sqrt(exact_size * (1 - exact_size) / kTrials));
  EXPECT_GT(naive_rate, 0.25);
}

}  // namespace
}  // namespace kvaudit::stats
