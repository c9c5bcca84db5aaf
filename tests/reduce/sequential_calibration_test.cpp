// suite/reduce/sequential_calibration.h: the preregistered request order (against a pure-Python
// Philox4x32-10 in tools/golden/make_sequential_golden.py), and the replay of a block's sequential
// tests: decisions, requests used, compute saved, exclusions, missing cells, fixed sequence.
#include "suite/reduce/sequential_calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "base/errors.h"
#include "statistics/rng.h"

namespace kvaudit::reduce {
namespace {

using stats::SequentialDecision;

TEST(SequentialCalibration, OrderMatchesTheIndependentPythonImplementation) {
  std::ifstream in(KVAUDIT_SEQUENTIAL_GOLDEN);
  ASSERT_TRUE(in) << KVAUDIT_SEQUENTIAL_GOLDEN;
  const auto golden = nlohmann::json::parse(in);
  ASSERT_GE(golden.at("orders").size(), 3u);
  for (const auto& o : golden.at("orders")) {
    const auto order =
        sequential_request_order(o.at("seed").get<std::uint64_t>(),
                                 o.at("block").get<std::string>(), o.at("n").get<std::size_t>());
    EXPECT_EQ(order, o.at("order").get<std::vector<std::size_t>>()) << o.at("block");
  }
}

TEST(SequentialCalibration, OrderIsAPermutationKeyedBySeedAndBlock) {
  const auto a = sequential_request_order(7, "block-a", 500);
  std::set<std::size_t> distinct(a.begin(), a.end());
  EXPECT_EQ(distinct.size(), 500u);
  EXPECT_EQ(*distinct.rbegin(), 499u);
  EXPECT_EQ(a, sequential_request_order(7, "block-a", 500));
  EXPECT_NE(a, sequential_request_order(8, "block-a", 500));
  EXPECT_NE(a, sequential_request_order(7, "block-b", 500));
  EXPECT_TRUE(sequential_request_order(7, "x", 0).empty());
  // Roughly uniform: where request 0 lands over 4000 (seed) draws, in 4 quarters of n = 40.
  std::vector<int> quarter(4, 0);
  for (std::uint64_t seed = 0; seed < 4000; ++seed) {
    const auto o = sequential_request_order(seed, "uniformity", 40);
    const auto pos = static_cast<std::size_t>(std::find(o.begin(), o.end(), 0u) - o.begin());
    ++quarter[pos / 10];
  }
  for (int q : quarter) EXPECT_NEAR(q, 1000, 120);  // SE ≈ 27
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);  // the FNV-1a 64 test vector
}

// Candidate losses over n requests: violation indicators with the given rate, from a Philox stream.
std::vector<double> violations(std::uint32_t stream, double rate, std::size_t n) {
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto w = stats::philox_words(99, stream, static_cast<std::uint32_t>(i / 2), 0,
                                       stats::RandomPurpose::simulation)[i % 2];
    x[i] = stats::unit_double(w) < rate ? 1.0 : 0.0;
  }
  return x;
}

SequentialCalibrationInput planted(std::size_t n) {
  SequentialCalibrationInput input;
  input.block = "planted";
  input.seed = 2026;
  input.epsilon = 0.05;
  input.delta = 0.05;
  input.candidates = {{"m@0.2", violations(0, 0.0, n), {}},
                      {"m@0.5", violations(1, 0.01, n), {}},
                      {"m@0.8", violations(2, 0.30, n), {}},
                      {"m@0.9", violations(3, 0.0, n), {}}};
  return input;
}

TEST(SequentialCalibration, ReplayEqualsTheFixedSequenceOnTheOrderedLosses) {
  const std::size_t n = 1200;
  const auto input = planted(n);
  const auto r = replay_sequential_calibration(input);
  // Independent path: reorder by hand and run the statistics function.
  std::vector<std::vector<double>> ordered(input.candidates.size());
  for (std::size_t i : sequential_request_order(input.seed, input.block, n)) {
    for (std::size_t j = 0; j < ordered.size(); ++j) {
      ordered[j].push_back(input.candidates[j].losses[i]);
    }
  }
  const auto expected = stats::sequential_fixed_sequence(ordered, 0.05, 0.05, 1200);
  ASSERT_EQ(r.candidates.size(), 4u);
  std::int64_t saved = 0;
  for (std::size_t j = 0; j < 4; ++j) {
    EXPECT_EQ(r.candidates[j].decision, expected.candidates[j].outcome.decision) << j;
    EXPECT_EQ(r.candidates[j].requests_used, expected.candidates[j].outcome.requests_used) << j;
    EXPECT_EQ(r.candidates[j].e_value, expected.candidates[j].outcome.e_value) << j;
    EXPECT_EQ(r.candidates[j].certified, expected.candidates[j].certified) << j;
    EXPECT_EQ(r.candidates[j].cells_saved, 1200 - r.candidates[j].requests_used);
    saved += r.candidates[j].cells_saved;
  }
  // The planted truth: rates 0 and 0.01 certify, 0.30 cannot, the clean candidate after it is not
  // certified (fixed sequence).
  EXPECT_TRUE(r.candidates[0].certified);
  EXPECT_TRUE(r.candidates[1].certified);
  EXPECT_EQ(r.candidates[2].decision, SequentialDecision::not_certifiable);
  EXPECT_FALSE(r.candidates[3].certified);
  ASSERT_TRUE(r.selected.has_value());
  EXPECT_EQ(*r.selected, 1u);
  EXPECT_EQ(r.selected_policy, "m@0.5");
  EXPECT_EQ(r.stop_index, 2u);
  EXPECT_EQ(r.candidate_cells_saved, saved);
  EXPECT_EQ(r.candidate_cells_total, 4 * 1200);
  EXPECT_GT(r.fraction_saved(), 0.0);
  EXPECT_LT(r.candidates[0].requests_used, 300);  // all zeros: certified early
  EXPECT_EQ(r.reference_cells_saved, 1200 - r.candidates[2].requests_used);
  EXPECT_EQ(r.n, 1200);
  EXPECT_EQ(r.n_max, 1200);
}

TEST(SequentialCalibration, ExcludedRequestsAreSkippedAndMissingCellsCountAsLosses) {
  const std::size_t n = 400;
  auto input = planted(n);
  input.candidates.resize(1);
  input.excluded.assign(n, 0);
  const auto order = sequential_request_order(input.seed, input.block, n);
  // Exclude the first 5 requests of the order, and make the next 3 missing for the candidate.
  for (std::size_t k = 0; k < 5; ++k) input.excluded[order[k]] = 1;
  input.candidates[0].missing.assign(n, 0);
  for (std::size_t k = 5; k < 8; ++k) input.candidates[0].missing[order[k]] = 1;
  const auto r = replay_sequential_calibration(input);
  EXPECT_EQ(r.n, 395);
  EXPECT_EQ(r.n_max, 400);
  EXPECT_EQ(r.candidates[0].imputed, 3);
  // Same as replaying the order without the excluded requests, with losses 1 where missing.
  std::vector<double> expected_losses;
  for (std::size_t k = 5; k < n; ++k) expected_losses.push_back(k < 8 ? 1.0 : 0.0);
  const auto alone = stats::replay_sequential(expected_losses, 0.05, 0.05, 400);
  EXPECT_EQ(r.candidates[0].decision, alone.decision);
  EXPECT_EQ(r.candidates[0].requests_used, alone.requests_used);
  EXPECT_EQ(r.candidates[0].cells_saved, 395 - alone.requests_used);
  // A missing cell may carry any placeholder loss (it is replaced by 1).
  input.candidates[0].losses[order[6]] = -7;
  EXPECT_NO_THROW(replay_sequential_calibration(input));
}

TEST(SequentialCalibration, AllExcludedCertifiesNothing) {
  auto input = planted(20);
  input.excluded.assign(20, 1);
  const auto r = replay_sequential_calibration(input);
  EXPECT_EQ(r.n, 0);
  EXPECT_FALSE(r.selected.has_value());
  EXPECT_EQ(r.selected_policy, "full-kv");
  EXPECT_EQ(r.candidate_cells_saved, 0);
}

TEST(SequentialCalibration, RefusesBadInput) {
  auto input = planted(50);
  auto bad = input;
  bad.candidates.clear();
  EXPECT_THROW(replay_sequential_calibration(bad), InputError);
  bad = input;
  bad.epsilon = 1.0;
  EXPECT_THROW(replay_sequential_calibration(bad), InputError);
  bad = input;
  bad.delta = 0.0;
  EXPECT_THROW(replay_sequential_calibration(bad), InputError);
  bad = input;
  bad.candidates[1].losses.pop_back();
  EXPECT_THROW(replay_sequential_calibration(bad), InputError);
  bad = input;
  bad.excluded.assign(3, 0);
  EXPECT_THROW(replay_sequential_calibration(bad), InputError);
  bad = input;
  bad.candidates[2].missing.assign(7, 0);
  EXPECT_THROW(replay_sequential_calibration(bad), InputError);
  bad = input;
  for (auto& c : bad.candidates) c.losses.clear();
  EXPECT_THROW(replay_sequential_calibration(bad), InputError);
  bad = input;
  bad.candidates[0].losses[3] = 1.5;
  try {
    replay_sequential_calibration(bad);
    FAIL() << "a loss of 1.5 was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("planted: candidate 'm@0.2' calibration request 3", 0), 0u) << what;
  }
}

}  // namespace
}  // namespace kvaudit::reduce
