// The betting test supermartingale with the aGRAPA bet, its futility rule and the fixed sequence
// over candidates. Formulas and sources: sequential_test.h.
#include "statistics/sequential_test.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/errors.h"
#include "statistics/argument_checks.h"

namespace kvaudit::stats {
namespace {

void validate(double epsilon, double delta, std::int64_t n_max, const char* where) {
  if (!(epsilon > 0.0 && epsilon < 1.0)) {
    throw InputError(std::string(where) + ": epsilon must be in (0, 1), got " +
                     exact_text(epsilon));
  }
  if (!(delta > 0.0 && delta < 1.0)) {
    throw InputError(std::string(where) + ": delta must be in (0, 1), got " + exact_text(delta));
  }
  if (n_max < 1) {
    throw InputError(std::string(where) + ": n_max must be >= 1, got " + std::to_string(n_max));
  }
}

}  // namespace

const char* sequential_decision_name(SequentialDecision d) {
  switch (d) {
    case SequentialDecision::undecided:
      return "undecided";
    case SequentialDecision::certified:
      return "certified";
    case SequentialDecision::not_certifiable:
      return "not_certifiable";
  }
  return "unknown";
}

SequentialRiskTest::SequentialRiskTest(double epsilon, double delta, std::int64_t n_max)
    : epsilon_(epsilon), delta_(delta), n_max_(n_max) {
  validate(epsilon, delta, n_max, "sequential test");
  log_threshold_ = -std::log(delta);
  max_bet_ = kSequentialBetCap / (1.0 - epsilon);
  log_best_factor_ = std::log1p(epsilon * max_bet_);
}

double SequentialRiskTest::next_bet() const {
  const double n = static_cast<double>(t_) + 1.0;
  const double mean = (0.5 + sum_) / n;
  const double variance = (0.25 + sum_squares_) / n;
  const double gap = epsilon_ - mean;
  if (gap <= 0.0) return 0.0;
  return std::min(gap / (variance + gap * gap), max_bet_);
}

SequentialDecision SequentialRiskTest::observe(double loss) {
  if (!(loss >= 0.0 && loss <= 1.0)) {
    throw InputError("sequential test: loss of request " + std::to_string(t_ + 1) +
                     " must be in [0, 1], got " + exact_text(loss));
  }
  if (decided()) {
    throw InputError("sequential test: observe() after the test decided (" +
                     std::string(sequential_decision_name(decision_)) + " at request " +
                     std::to_string(t_) + ")");
  }
  if (t_ >= n_max_) {
    throw InputError("sequential test: more than n_max = " + std::to_string(n_max_) + " losses");
  }
  const double bet = next_bet();
  log_wealth_ += std::log1p(bet * (epsilon_ - loss));
  ++t_;
  sum_ += loss;
  const double mean = (0.5 + sum_) / (static_cast<double>(t_) + 1.0);
  sum_squares_ += (loss - mean) * (loss - mean);

  if (log_wealth_ >= log_threshold_) {
    decision_ = SequentialDecision::certified;
  } else if (log_wealth_ + static_cast<double>(n_max_ - t_) * log_best_factor_ < log_threshold_) {
    decision_ = SequentialDecision::not_certifiable;
  }
  return decision_;
}

double SequentialRiskTest::e_value() const { return std::exp(log_wealth_); }

SequentialOutcome SequentialRiskTest::outcome() const {
  return {decision_, t_, e_value(), log_wealth_};
}

SequentialOutcome replay_sequential(const std::vector<double>& losses_in_order, double epsilon,
                                    double delta, std::int64_t n_max) {
  validate(epsilon, delta, n_max, "replay_sequential");
  if (static_cast<std::int64_t>(losses_in_order.size()) > n_max) {
    throw InputError("replay_sequential: " + std::to_string(losses_in_order.size()) +
                     " losses but n_max = " + std::to_string(n_max));
  }
  SequentialRiskTest test(epsilon, delta, n_max);
  for (double loss : losses_in_order) {
    if (test.observe(loss) != SequentialDecision::undecided) break;
  }
  return test.outcome();
}

SequentialFixedSequenceResult sequential_fixed_sequence(
    const std::vector<std::vector<double>>& losses, double epsilon, double delta,
    std::int64_t n_max) {
  validate(epsilon, delta, n_max, "sequential_fixed_sequence");
  if (losses.empty()) throw InputError("sequential_fixed_sequence: no candidates");
  const std::size_t n = losses.front().size();
  for (std::size_t j = 0; j < losses.size(); ++j) {
    if (losses[j].size() != n) {
      throw InputError("sequential_fixed_sequence: candidate " + std::to_string(j) + " has " +
                       std::to_string(losses[j].size()) + " losses, candidate 0 has " +
                       std::to_string(n));
    }
  }
  if (static_cast<std::int64_t>(n) > n_max) {
    throw InputError("sequential_fixed_sequence: " + std::to_string(n) +
                     " losses per candidate but n_max = " + std::to_string(n_max));
  }
  const std::size_t J = losses.size();
  std::vector<SequentialRiskTest> tests(J, SequentialRiskTest(epsilon, delta, n_max));
  SequentialFixedSequenceResult result;
  result.candidates.resize(J);
  // Candidates [0, active_end) still matter: the first one that cannot certify ends the range.
  std::size_t active_end = J;
  for (std::size_t t = 0; t < n; ++t) {
    bool any_running = false;
    for (std::size_t j = 0; j < active_end; ++j) {
      if (tests[j].decided()) continue;
      tests[j].observe(losses[j][t]);
      any_running = true;
    }
    for (std::size_t j = 0; j < active_end; ++j) {
      if (tests[j].decision() == SequentialDecision::not_certifiable) {
        for (std::size_t later = j + 1; later < active_end; ++later) {
          if (!tests[later].decided()) result.candidates[later].stopped_early = true;
        }
        active_end = j + 1;
        break;
      }
    }
    if (!any_running) break;
    bool all_decided = true;
    for (std::size_t j = 0; j < active_end; ++j) all_decided &= tests[j].decided();
    if (all_decided) break;
  }
  result.stop_index = J;
  bool chain = true;
  for (std::size_t j = 0; j < J; ++j) {
    auto& c = result.candidates[j];
    c.outcome = tests[j].outcome();
    result.requests_seen = std::max(result.requests_seen, c.outcome.requests_used);
    chain = chain && c.outcome.decision == SequentialDecision::certified;
    c.certified = chain;
    if (chain) {
      result.selected = j;
    } else if (result.stop_index == J) {
      result.stop_index = j;
    }
  }
  return result;
}

}  // namespace kvaudit::stats
