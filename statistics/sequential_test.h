// Anytime-valid (sequential) certification of one candidate by a betting test supermartingale
// (docs/design/sequential.md).
//
// H0: R ≥ ε, where R = E[x] is the mean of losses x_i ∈ [0, 1] (0/1 violation indicators
// V_i = 1{U_full − U_policy > τ} for the violation risk, clip(U_full − U_policy, 0, 1) for the mean
// loss), observed one request at a time in the preregistered random order, at most n_max of them.
//
// Wealth (Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting",
// JRSS-B 86(1), 2024 (arXiv:2010.09686), the betting process for a one-sided test):
//   M_0 = 1,   M_t = Π_{i≤t} (1 + λ_i (ε − x_i)),
// λ_i predictable (a function of x_1..x_{i−1}) and in [0, c/(1 − ε)] with c = kSequentialBetCap:
// then every factor is ≥ 1 − c > 0, and under H0 E[1 + λ_i (ε − x_i) | past] = 1 + λ_i (ε − R) ≤ 1,
// so M is a nonnegative supermartingale and Ville's inequality gives
//   P_H0(∃ t : M_t ≥ 1/δ) ≤ δ          (for any stopping rule; optional stopping is free).
// Bet: aGRAPA ("approximate growth-rate adaptive to the particular alternative", WSR 2024, the
// betting-strategies section), one-sided:
//   μ̂_t  = (1/2 + Σ_{i≤t} x_i) / (t + 1),     σ̂²_t = (1/4 + Σ_{i≤t} (x_i − μ̂_i)²) / (t + 1),
//   λ_t  = clip( (ε − μ̂_{t−1}) / (σ̂²_{t−1} + (ε − μ̂_{t−1})²),  0,  c/(1 − ε) ).
// (The bound is c/(1 − ε), not c/ε: the factor's worst case is x = 1, 1 − λ(1 − ε) ≥ 1 − c.)
// Decisions, checked after every observation t = 1, 2, …:
//   certified         at the first t with M_t ≥ 1/δ (compared as log M_t ≥ −log δ);
//   not_certifiable   at the first t with log M_t + (n_max − t)·log(1 + ε·c/(1 − ε)) < −log δ:
//                     no factor can exceed 1 + ε·c/(1 − ε) (x = 0 at the largest bet), so even
//                     n_max − t further zero losses cannot reach 1/δ. Stopping then never loses a
//                     certification the test could still make (no cost in validity or power);
//                     at t = n_max it is simply M_{n_max} < 1/δ.
//   undecided         otherwise (only while t < n_max, e.g. a stream that ended early: treat as
//                     not certified).
// Logs are accumulated with log1p; the product is never formed, so nothing overflows.
// Fixed sequence over candidates (sequential_fixed_sequence): candidate j is certified iff its own
// test certified and every earlier candidate's did; each test at level δ, FWER ≤ δ (Bauer 1991;
// the argument is written out in docs/design/sequential.md §Validity). Once a candidate is
// not_certifiable, no later candidate can be certified, so their tests stop too (stopped_early).
// Every function validates its inputs and throws kvaudit::InputError naming the argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvaudit::stats {

// c: the largest bet is c/(1 − ε). Fixed (part of the procedure, hence of the preregistration).
inline constexpr double kSequentialBetCap = 0.5;

enum class SequentialDecision { undecided, certified, not_certifiable };

// "undecided", "certified", "not_certifiable" (what tables and JSON files print).
const char* sequential_decision_name(SequentialDecision d);

struct SequentialOutcome {
  SequentialDecision decision = SequentialDecision::undecided;
  std::int64_t requests_used = 0;  // t at the decision (or the losses seen when undecided)
  double e_value = 1;              // M_t at that t (may be +inf only if it overflows a double)
  double log_e_value = 0;          // log M_t
};

class SequentialRiskTest {
 public:
  // Requires ε in (0, 1), δ in (0, 1), n_max ≥ 1.
  SequentialRiskTest(double epsilon, double delta, std::int64_t n_max);

  // Observes the next loss (in [0, 1], finite) and returns the decision after it. Throws
  // InputError for a loss outside [0, 1], and when the test has already decided or has seen n_max
  // losses (the caller must stop feeding a decided test).
  SequentialDecision observe(double loss);

  SequentialDecision decision() const { return decision_; }
  bool decided() const { return decision_ != SequentialDecision::undecided; }
  std::int64_t requests_used() const { return t_; }
  double log_e_value() const { return log_wealth_; }
  double e_value() const;
  double next_bet() const;  // λ_{t+1}, the bet the next observation will be made with
  SequentialOutcome outcome() const;

  double epsilon() const { return epsilon_; }
  double delta() const { return delta_; }
  std::int64_t n_max() const { return n_max_; }

 private:
  double epsilon_, delta_;
  std::int64_t n_max_;
  double log_threshold_;    // −log δ
  double log_best_factor_;  // log(1 + ε·c/(1 − ε))
  double max_bet_;          // c/(1 − ε)
  std::int64_t t_ = 0;
  double sum_ = 0;          // Σ x_i
  double sum_squares_ = 0;  // Σ (x_i − μ̂_i)²
  double log_wealth_ = 0;   // log M_t
  SequentialDecision decision_ = SequentialDecision::undecided;
};

// Feeds losses_in_order to a fresh test until it decides or the losses end. Requires
// losses_in_order.size() ≤ n_max (else InputError); the losses after the decision are ignored.
SequentialOutcome replay_sequential(const std::vector<double>& losses_in_order, double epsilon,
                                    double delta, std::int64_t n_max);

// Fixed sequence over J candidates, all observing the same requests in the same order
// (losses[j][t] = loss of candidate j on the t-th request of the order; equal lengths ≤ n_max).
// The candidates' tests advance together, request by request; after request t every test that
// decided stops, and when candidate j is not_certifiable (or undecided at the end) the tests of
// every later candidate stop as well, since fixed sequence can no longer certify them.
struct SequentialCandidateResult {
  SequentialOutcome outcome;   // the candidate's own test (undecided when stopped early)
  bool stopped_early = false;  // stopped because an earlier candidate can no longer certify
  bool certified = false;      // own test certified and every earlier candidate certified
};

struct SequentialFixedSequenceResult {
  std::vector<SequentialCandidateResult> candidates;  // preregistered order
  std::optional<std::size_t> selected;  // last certified candidate; nullopt = full-KV fallback
  std::size_t stop_index = 0;           // first candidate not certified (J when all are)
  std::int64_t requests_seen = 0;       // requests the family needed: max over requests_used
};

SequentialFixedSequenceResult sequential_fixed_sequence(
    const std::vector<std::vector<double>>& losses, double epsilon, double delta,
    std::int64_t n_max);

}  // namespace kvaudit::stats
