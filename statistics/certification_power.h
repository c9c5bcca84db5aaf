// Power and sample size of the fixed-n binomial LTT test of one candidate (issue 17, `kvaudit stats
// power` and `sample-size`; docs/design/statistics.md §Bounded-loss risks, procedures and
// planning). The test certifies iff K ≤ K*(n, ε, δ) (binomial.h), so with a true violation rate r
// and K ~ Bin(n, r):
//   power(n, ε, δ, r) = P{Bin(n, r) ≤ K*(n, ε, δ)},   0 when K* = −1 (nothing certifiable).
// For a fixed sequence of J candidates, the power of reaching and certifying candidate j is at most
// this (it also needs every earlier candidate certified); for one candidate it is exact.
//
// Power is not monotone in n: K* grows by whole steps (K*(n+1) ∈ {K*(n), K*(n) + 1}, because
// P{Bin(n+1, ε) ≤ K} ≤ P{Bin(n, ε) ≤ K} ≤ P{Bin(n+1, ε) ≤ K + 1}, and ⌊(n+1)ε⌋ ≤ ⌊nε⌋ + 1), and
// between two steps P{Bin(n, r) ≤ K*} falls as n grows: a saw-tooth (at ε = δ = 0.05, r = 0.03 the
// power first reaches 0.8 at n = 601 and falls below it again until n = 694; the largest one-step
// drop up to n = 4000 is 0.228 → 0.223 at n = 93). So sample-size planning reports
// two answers, both searched over every n in [1, n_max]:
//   n         the smallest n with power ≥ target (the cheapest design that reaches the target —
//             but a few more requests can drop below it again);
//   stable_n  the smallest n from which power ≥ target for every n' in [stable_n, n_max] (safe
//             when the final n may end up a little larger than planned, e.g. a few extra requests).
// K*(n) is updated incrementally (one cdf per n, checked against max_certifiable_violations by the
// tests) and the power is one more cdf: O(n_max) binomial tails.
#pragma once

#include <cstdint>

namespace kvaudit::stats {

// P{Bin(n, rate) ≤ K*(n, epsilon, delta)}; 0 when K* = −1. Requires 1 ≤ n ≤ 2^53, epsilon and
// delta in (0, 1), rate in [0, 1].
double certification_power(std::int64_t n, double epsilon, double delta, double rate);

struct SampleSize {
  std::int64_t n = 0;         // smallest n in [1, n_max] with power ≥ target; 0 when none
  double power = 0;           // power at n (0 when n = 0)
  std::int64_t k_star = -1;   // K*(n, ε, δ) at n
  bool found = false;         // some n in [1, n_max] reaches the target
  std::int64_t stable_n = 0;  // smallest n with power ≥ target on all of [stable_n, n_max]; 0 if
                              // power(n_max) < target
  double stable_power = 0;    // power at stable_n
  std::int64_t stable_k_star = -1;
  double min_power_after = 0;  // min power over [stable_n, n_max] (≥ target; 0 when stable_n = 0)
  std::int64_t n_max = 0;      // the searched range [1, n_max]
  double power_at_n_max = 0;
};

// Searches n = 1..n_max (see above). Requires epsilon and delta in (0, 1), rate in [0, epsilon)
// (at rate ≥ ε the power never exceeds δ), target_power in (0, 1) and 1 ≤ n_max ≤ 10^9 (the scan
// costs two binomial tails per n). Throws kvaudit::InputError naming the argument.
SampleSize certification_sample_size(double epsilon, double delta, double rate, double target_power,
                                     std::int64_t n_max);

// The largest n_max accepted by certification_sample_size.
inline constexpr std::int64_t kMaxSampleSizeSearch = 1000000000;

}  // namespace kvaudit::stats
