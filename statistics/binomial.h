// Binomial tails and the Learn-then-Test (LTT) p-value of the certification procedure.
//
// For a candidate with K violations among n calibration requests and a contract (ε, δ):
//   p(K) = P{Bin(n, ε) ≤ K}   if K ≤ ⌊nε⌋ − 1,   and p(K) = 1 otherwise
// (docs/design/statistics.md §The procedure; the guard only makes p larger, so validity is kept).
// The cap ⌊nε⌋ is computed as floor(n·ε + 1e-9): 100·0.29 is 28.999999999999996 in IEEE double.
// K*(n, ε, δ) = max{K : p(K) ≤ δ} is found by bisection over the cdf on [0, ⌊nε⌋ − 1] (p is
// non-decreasing in K): O(log n) cdf evaluations and O(1) memory for any n ≤ 2^53, and the same
// K as the explicit walk up the cdf it replaced (tests/statistics/binomial_test.cpp compares them).
// Never boost::math::quantile: its result depends on the discrete-quantile policy
// (docs/design/statistics.md §Pitfalls, item 8).
// Tails come from Boost.Math's binomial distribution (regularised incomplete beta), in double
// precision: trials and counts must be ≤ 2^53 (kMaxTrials), where every integer is exact as a
// double; larger ones are refused. Beyond n ≈ 1e12 Boost's tails carry an absolute error of up to
// ~1e-6 (no longer monotone in K to the last digits), so K* there satisfies p(K*) ≤ δ < p(K*+1)
// for the computed p but may differ from the exact-arithmetic K* by a few units in ~1e12.
// Every function validates its inputs and throws kvaudit::InputError naming the argument.
#pragma once

#include <cstdint>

namespace kvaudit::stats {

// 2^53: the largest trial count (n) accepted; every integer up to it is exact in a double.
inline constexpr std::int64_t kMaxTrials = std::int64_t{1} << 53;

// P{Bin(trials, probability) ≤ successes}. Requires 0 ≤ trials ≤ kMaxTrials, 0 ≤ successes ≤
// trials and probability in [0, 1].
double binomial_cdf(std::int64_t trials, double probability, std::int64_t successes);

// P{Bin(trials, probability) ≥ successes}, computed as a complement (no cancellation). Requires
// 0 ≤ successes ≤ trials; successes = 0 gives 1.
double binomial_upper_tail(std::int64_t trials, double probability, std::int64_t successes);

// ⌊n·ε⌋ computed as floor(n·ε + 1e-9). Requires 1 ≤ n ≤ kMaxTrials and ε in (0, 1).
std::int64_t violation_cap(std::int64_t n, double epsilon);

// The LTT p-value p(K) above. Requires 1 ≤ n ≤ kMaxTrials, 0 ≤ violations ≤ n, ε in (0, 1).
double ltt_p_value(std::int64_t n, double epsilon, std::int64_t violations);

// K*(n, ε, δ): the largest K with p(K) ≤ δ (inclusive comparison, as the contract states), or −1
// when no K certifies (then every candidate falls back to full KV). Requires 1 ≤ n ≤ kMaxTrials,
// ε and δ in (0, 1). At most ⌈log2(⌊nε⌋)⌉ + 1 cdf evaluations.
std::int64_t max_certifiable_violations(std::int64_t n, double epsilon, double delta);

}  // namespace kvaudit::stats
