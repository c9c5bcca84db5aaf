// Binomial tails and the Learn-then-Test (LTT) p-value of the certification procedure.
//
// For a candidate with K violations among n calibration requests and a contract (ε, δ):
//   p(K) = P{Bin(n, ε) ≤ K}   if K ≤ ⌊nε⌋ − 1,   and p(K) = 1 otherwise
// (docs/design/statistics.md §The procedure; the guard only makes p larger, so validity is kept).
// The cap ⌊nε⌋ is computed as floor(n·ε + 1e-9): 100·0.29 is 28.999999999999996 in IEEE double.
// K*(n, ε, δ) = max{K : p(K) ≤ δ} is found by the explicit monotone loop over the cdf, never by
// boost::math::quantile (its result depends on the discrete-quantile policy;
// docs/design/statistics.md §Pitfalls, item 8).
// Tails come from Boost.Math's binomial distribution (regularised incomplete beta).
// Every function validates its inputs and throws kvaudit::InputError naming the argument.
#pragma once

#include <cstdint>

namespace kvaudit::stats {

// P{Bin(trials, probability) ≤ successes}. Requires trials ≥ 0, 0 ≤ successes ≤ trials and
// probability in [0, 1].
double binomial_cdf(std::int64_t trials, double probability, std::int64_t successes);

// P{Bin(trials, probability) ≥ successes}, computed as a complement (no cancellation). Requires
// 0 ≤ successes ≤ trials; successes = 0 gives 1.
double binomial_upper_tail(std::int64_t trials, double probability, std::int64_t successes);

// ⌊n·ε⌋ computed as floor(n·ε + 1e-9). Requires n ≥ 1 and ε in (0, 1).
std::int64_t violation_cap(std::int64_t n, double epsilon);

// The LTT p-value p(K) above. Requires n ≥ 1, 0 ≤ violations ≤ n, ε in (0, 1).
double ltt_p_value(std::int64_t n, double epsilon, std::int64_t violations);

// K*(n, ε, δ): the largest K with p(K) ≤ δ (inclusive comparison, as the contract states), or −1
// when no K certifies (then every candidate falls back to full KV). Requires n ≥ 1, ε and δ in
// (0, 1).
std::int64_t max_certifiable_violations(std::int64_t n, double epsilon, double delta);

}  // namespace kvaudit::stats
