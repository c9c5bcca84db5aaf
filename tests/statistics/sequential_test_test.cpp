// The sequential (betting) certification test, statistics/sequential_test.h: the wealth against
// confseq's betting_mart (tests/golden/statistics/sequential_golden.json, written by
// tools/golden/make_sequential_golden.py), the decisions, the futility rule never stopping a test
// that could still certify, the fixed sequence over candidates, and bad input.
#include "statistics/sequential_test.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/errors.h"
#include "tests/statistics/golden_reader.h"
#include "tests/statistics/simulation_stream.h"

namespace kvaudit::stats {
namespace {

const nlohmann::json& sequential_golden() {
  static const nlohmann::json golden = [] {
    std::ifstream in(KVAUDIT_SEQUENTIAL_GOLDEN);
    if (!in) throw std::runtime_error("cannot open " + std::string(KVAUDIT_SEQUENTIAL_GOLDEN));
    return nlohmann::json::parse(in);
  }();
  return golden;
}

TEST(SequentialTest, WealthMatchesConfseqBettingMart) {
  const auto& golden = sequential_golden();
  ASSERT_EQ(golden.at("bet_cap_c").get<double>(), kSequentialBetCap);
  ASSERT_GE(golden.at("cases").size(), 4u);
  for (const auto& c : golden.at("cases")) {
    const std::string name = c.at("name");
    const auto losses = c.at("losses").get<std::vector<double>>();
    const double epsilon = c.at("epsilon"), delta = c.at("delta");
    const std::int64_t n_max = c.at("n_max");
    // The wealth path without stopping (n_max large enough that futility never fires).
    SequentialRiskTest path(epsilon, 0.999999, std::int64_t{1} << 40);
    std::vector<double> log_wealth;
    for (double x : losses) {
      if (path.decided()) break;
      path.observe(x);
      log_wealth.push_back(path.log_e_value());
    }
    for (const auto& [t_text, expected] : c.at("log_wealth").items()) {
      const auto t = static_cast<std::size_t>(std::stoul(t_text));
      if (t > log_wealth.size()) continue;  // the wealth path above stopped (certified at δ≈1)
      EXPECT_TRUE(testing::relatively_close(log_wealth[t - 1], expected.get<double>(), 1e-9) ||
                  std::fabs(log_wealth[t - 1] - expected.get<double>()) < 1e-12)
          << name << " t=" << t << ": " << log_wealth[t - 1] << " vs " << expected;
    }
    const SequentialOutcome o = replay_sequential(losses, epsilon, delta, n_max);
    EXPECT_EQ(sequential_decision_name(o.decision), c.at("decision").get<std::string>()) << name;
    EXPECT_EQ(o.requests_used, c.at("requests_used").get<std::int64_t>()) << name;
    EXPECT_NEAR(o.e_value, std::exp(o.log_e_value), 1e-12 * o.e_value);
  }
}

TEST(SequentialTest, NoBetBeforeTheRegularisedMeanDropsBelowEpsilon) {
  // μ̂_0 = 1/2 > ε: the first bet is 0 and zeros do not move the wealth until (1/2)/(t+1) < ε.
  SequentialRiskTest test(0.05, 0.05, 1200);
  EXPECT_EQ(test.next_bet(), 0.0);
  for (int t = 1; t <= 9; ++t) {
    test.observe(0.0);
    EXPECT_EQ(test.log_e_value(), 0.0) << "t=" << t;
  }
  test.observe(0.0);  // μ̂_9 = 0.05 = ε: still no bet
  EXPECT_EQ(test.log_e_value(), 0.0);
  EXPECT_GT(test.next_bet(), 0.0);  // μ̂_10 = 0.5/11 < ε
  EXPECT_LE(test.next_bet(), kSequentialBetCap / (1 - 0.05));
}

TEST(SequentialTest, WealthIsTheProductOfTheFactorsWithThePredictableBets) {
  testing::SimulationStream stream(5, 0);
  SequentialRiskTest test(0.1, 0.05, 100000);
  double log_product = 0;
  for (int i = 0; i < 3000 && !test.decided(); ++i) {
    const double x = stream.uniform() < 0.3 ? stream.uniform() : 0.0;
    const double bet = test.next_bet();
    ASSERT_GE(bet, 0.0);
    ASSERT_LE(bet, kSequentialBetCap / 0.9);
    log_product += std::log(1 + bet * (0.1 - x));
    test.observe(x);
    ASSERT_NEAR(test.log_e_value(), log_product, 1e-9 * (1 + std::fabs(log_product)));
  }
}

TEST(SequentialTest, FutilityNeverStopsATestThatCouldStillCertify) {
  // Whenever the test says not_certifiable at t, the same prefix followed by zero losses up to
  // n_max (the best case) never reaches 1/δ: checked with a test whose n_max is so large that it
  // never declares futility.
  constexpr std::int64_t kNMax = 400;
  int futile = 0;
  for (std::uint32_t trial = 0; trial < 300; ++trial) {
    testing::SimulationStream stream(11, trial);
    const double rate = 0.02 + 0.1 * stream.uniform();
    SequentialRiskTest test(0.05, 0.05, kNMax);
    std::vector<double> prefix;
    while (!test.decided()) {
      prefix.push_back(stream.bernoulli(rate) ? 1.0 : 0.0);
      test.observe(prefix.back());
    }
    if (test.decision() != SequentialDecision::not_certifiable) continue;
    ++futile;
    SequentialRiskTest best(0.05, 0.05, std::int64_t{1} << 40);
    for (double x : prefix) best.observe(x);
    for (auto t = static_cast<std::int64_t>(prefix.size()); t < kNMax && !best.decided(); ++t) {
      best.observe(0.0);
    }
    EXPECT_NE(best.decision(), SequentialDecision::certified) << "trial " << trial;
  }
  EXPECT_GT(futile, 50);  // the check above was exercised
}

TEST(SequentialTest, CertifiesAllZerosAndRejectsAllOnes) {
  const auto zeros = replay_sequential(std::vector<double>(1200, 0.0), 0.05, 0.05, 1200);
  EXPECT_EQ(zeros.decision, SequentialDecision::certified);
  EXPECT_GE(zeros.e_value, 1 / 0.05);
  const auto ones = replay_sequential(std::vector<double>(1200, 1.0), 0.05, 0.05, 1200);
  EXPECT_EQ(ones.decision, SequentialDecision::not_certifiable);
  EXPECT_LT(ones.requests_used, 1200);
  // A stream that ends before n_max without a decision stays undecided (= not certified).
  const auto short_stream = replay_sequential(std::vector<double>(20, 0.0), 0.05, 0.05, 1200);
  EXPECT_EQ(short_stream.decision, SequentialDecision::undecided);
  EXPECT_EQ(short_stream.requests_used, 20);
  // At n_max an undecided test becomes not_certifiable (M < 1/δ, nothing left to observe).
  const auto at_end = replay_sequential(std::vector<double>(20, 0.0), 0.05, 0.05, 20);
  EXPECT_EQ(at_end.decision, SequentialDecision::not_certifiable);
}

TEST(SequentialTest, FixedSequenceCertifiesOnlyAnUnbrokenPrefix) {
  const std::size_t n = 600;
  std::vector<std::vector<double>> losses(4, std::vector<double>(n, 0.0));
  // Candidate 1 violates often: not certifiable; candidates 2 and 3 are clean but come after it.
  for (std::size_t i = 0; i < n; i += 3) losses[1][i] = 1.0;
  const auto r = sequential_fixed_sequence(losses, 0.05, 0.05, 600);
  ASSERT_EQ(r.candidates.size(), 4u);
  EXPECT_EQ(r.candidates[0].outcome.decision, SequentialDecision::certified);
  EXPECT_TRUE(r.candidates[0].certified);
  EXPECT_EQ(r.candidates[1].outcome.decision, SequentialDecision::not_certifiable);
  EXPECT_FALSE(r.candidates[1].certified);
  EXPECT_FALSE(r.candidates[2].certified);
  EXPECT_FALSE(r.candidates[3].certified);
  EXPECT_EQ(r.stop_index, 1u);
  ASSERT_TRUE(r.selected.has_value());
  EXPECT_EQ(*r.selected, 0u);
  // Candidates 2 and 3 certify their own tests (zeros) before candidate 1 is declared futile, so
  // they are not "stopped early"; each candidate's requests match a lone replay.
  for (std::size_t j = 0; j < 4; ++j) {
    const auto alone = replay_sequential(losses[j], 0.05, 0.05, 600);
    if (!r.candidates[j].stopped_early) {
      EXPECT_EQ(r.candidates[j].outcome.requests_used, alone.requests_used) << j;
      EXPECT_EQ(r.candidates[j].outcome.decision, alone.decision) << j;
    }
  }
  EXPECT_EQ(r.requests_seen, r.candidates[1].outcome.requests_used);
}

TEST(SequentialTest, FixedSequenceStopsLaterCandidatesAfterAFailure) {
  const std::size_t n = 600;
  std::vector<std::vector<double>> losses(3, std::vector<double>(n, 0.0));
  // Candidate 0: 30 zeros (its bets grow), then only violations: it loses wealth and is declared
  // futile earlier than candidate 1 (rate 1/8: it never bets, so only the end of the budget makes
  // it futile). Candidate 2 alone would certify.
  for (std::size_t i = 30; i < n; ++i) losses[0][i] = 1.0;
  for (std::size_t i = 0; i < n; i += 8) losses[1][i] = 1;
  const auto alone0 = replay_sequential(losses[0], 0.05, 0.05, 600);
  const auto alone1 = replay_sequential(losses[1], 0.05, 0.05, 600);
  ASSERT_EQ(alone0.decision, SequentialDecision::not_certifiable);
  ASSERT_LT(alone0.requests_used, alone1.requests_used);
  for (std::size_t i = 0; i < n; ++i) losses[2][i] = (i % 100 == 99) ? 1.0 : 0.0;
  const auto alone2 = replay_sequential(losses[2], 0.05, 0.05, 600);
  const auto r = sequential_fixed_sequence(losses, 0.05, 0.05, 600);
  EXPECT_EQ(r.candidates[0].outcome.decision, SequentialDecision::not_certifiable);
  EXPECT_TRUE(r.candidates[1].stopped_early);
  EXPECT_EQ(r.candidates[1].outcome.decision, SequentialDecision::undecided);
  EXPECT_EQ(r.candidates[1].outcome.requests_used, r.candidates[0].outcome.requests_used);
  // Candidate 2 certified alone (rate 1/100) before candidate 0 failed: kept, not stopped early.
  EXPECT_EQ(r.candidates[2].outcome.decision, alone2.decision);
  EXPECT_EQ(r.candidates[2].stopped_early, alone2.requests_used > alone0.requests_used);
  EXPECT_FALSE(r.candidates[2].certified);
  EXPECT_FALSE(r.selected.has_value());
  EXPECT_EQ(r.stop_index, 0u);
  EXPECT_EQ(r.requests_seen, r.candidates[0].outcome.requests_used);
  EXPECT_LT(r.requests_seen, static_cast<std::int64_t>(n));
}

TEST(SequentialTest, RefusesBadInput) {
  EXPECT_THROW(SequentialRiskTest(0.0, 0.05, 10), InputError);
  EXPECT_THROW(SequentialRiskTest(1.0, 0.05, 10), InputError);
  EXPECT_THROW(SequentialRiskTest(0.05, 0.0, 10), InputError);
  EXPECT_THROW(SequentialRiskTest(0.05, 1.0, 10), InputError);
  EXPECT_THROW(SequentialRiskTest(0.05, 0.05, 0), InputError);
  SequentialRiskTest test(0.05, 0.05, 500);
  EXPECT_THROW(test.observe(-0.1), InputError);
  EXPECT_THROW(test.observe(1.5), InputError);
  EXPECT_THROW(test.observe(std::nan("")), InputError);
  EXPECT_EQ(test.requests_used(), 0);  // refused losses are not counted
  test.observe(0.0);
  EXPECT_EQ(test.requests_used(), 1);
  SequentialRiskTest tiny(0.05, 0.05, 2);
  tiny.observe(0.0);
  EXPECT_TRUE(tiny.decided());  // one more zero cannot reach 1/δ: futile at t = 1
  EXPECT_THROW(tiny.observe(0.0), InputError);
  EXPECT_THROW(replay_sequential(std::vector<double>(3, 0.0), 0.05, 0.05, 2), InputError);
  EXPECT_THROW(sequential_fixed_sequence({}, 0.05, 0.05, 10), InputError);
  EXPECT_THROW(sequential_fixed_sequence({{0.0, 0.0}, {0.0}}, 0.05, 0.05, 10), InputError);
  try {
    SequentialRiskTest(0.05, 0.05, 10).observe(2.0);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("loss of request 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvaudit::stats
