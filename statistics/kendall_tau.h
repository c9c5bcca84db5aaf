// Kendall's τ-b rank correlation with ties (Kendall 1945), for comparing method rankings between
// backends. With C concordant and D discordant pairs, n0 = n(n−1)/2, n1 = Σ t(t−1)/2 over tie
// groups of x, n2 likewise for y:  τ_b = (C − D) / √((n0 − n1)(n0 − n2)). p-value (two-sided, as
// scipy.stats.kendalltau(method='auto')): exact when there are no ties and n ≤ 33 (permutation
// distribution of the number of discordant pairs, Mahonian numbers); otherwise the normal
// approximation with the tie-corrected variance
//   var = (n(n−1)(2n+5) − Σ_x t(t−1)(2t+5) − Σ_y u(u−1)(2u+5)) / 18
//       + (Σ_x t(t−1)) (Σ_y u(u−1)) / (2n(n−1))
//       + (Σ_x t(t−1)(t−2)) (Σ_y u(u−1)(u−2)) / (9n(n−1)(n−2)),   z = (C − D)/√var.
// O(n²) pair counting: rankings have a handful of methods.
#pragma once

#include <cstdint>
#include <vector>

namespace kvaudit::stats {

struct KendallTauResult {
  std::int64_t n = 0;
  std::int64_t concordant = 0;
  std::int64_t discordant = 0;
  double tau_b = 0;      // NaN when one variable is constant (τ-b undefined)
  double p_value = 1;    // two-sided; NaN when τ-b is undefined
  bool exact_p = false;  // true: permutation distribution; false: normal approximation
};

// Requires equal lengths ≥ 2 and finite values; throws kvaudit::InputError otherwise.
KendallTauResult kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace kvaudit::stats
