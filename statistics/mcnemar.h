// Exact McNemar test for paired 0/1 outcomes (McNemar 1947; exact form = binomial sign test on
// the discordant pairs). With n10 = #{a = 1, b = 0} and n01 = #{a = 0, b = 1}, under H0 the number
// n10 of the N = n10 + n01 discordant pairs is Bin(N, 1/2):
//   p_greater (H1: a better)  = P{Bin(N, 1/2) ≥ n10}
//   p_less    (H1: b better)  = P{Bin(N, 1/2) ≤ n10}
//   p_two_sided = min(1, 2 · P{Bin(N, 1/2) ≤ min(n10, n01)})   (= statsmodels mcnemar(exact=True)
//   and scipy binomtest(n10, N, 0.5) for the symmetric null)
// N = 0 gives 1 for all three. Recommended over the bootstrap for n < ~50 pairs
// (docs/design/statistics.md §Small samples).
#pragma once

#include <cstdint>
#include <vector>

namespace kvaudit::stats {

struct McNemarResult {
  std::int64_t a_only = 0;  // n10: a correct, b wrong
  std::int64_t b_only = 0;  // n01: a wrong, b correct
  std::int64_t pairs = 0;   // all pairs (concordant included); 0 when built from counts
  double p_two_sided = 1;
  double p_greater = 1;  // H1: a better than b
  double p_less = 1;     // H1: b better than a
};

// From the discordant counts (each ≥ 0).
McNemarResult exact_mcnemar(std::int64_t a_only, std::int64_t b_only);

// From paired 0/1 outcomes of equal length; throws kvaudit::InputError for other values or
// lengths.
McNemarResult exact_mcnemar(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b);

}  // namespace kvaudit::stats
