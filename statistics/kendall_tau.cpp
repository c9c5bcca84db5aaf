// Kendall's τ-b with ties and its two-sided p-value (exact permutation distribution without ties
// for n ≤ 33, else the tie-corrected normal approximation), following scipy.stats.kendalltau's
// method='auto'. Formulas in kendall_tau.h.
#include "statistics/kendall_tau.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "base/errors.h"

namespace kvaudit::stats {
namespace {

struct TieSums {
  double pairs = 0;     // Σ t(t−1)/2
  double cubic = 0;     // Σ t(t−1)(t−2)
  double variance = 0;  // Σ t(t−1)(2t+5)
};

TieSums tie_sums(const std::vector<double>& v) {
  std::map<double, std::int64_t> groups;
  for (double value : v) ++groups[value];
  TieSums sums;
  for (const auto& [value, count] : groups) {
    const auto t = static_cast<double>(count);
    sums.pairs += t * (t - 1) / 2;
    sums.cubic += t * (t - 1) * (t - 2);
    sums.variance += t * (t - 1) * (2 * t + 5);
  }
  return sums;
}

// P-value of the exact permutation test (no ties): 2 · P{inversions ≤ c} with c = min(D, n0 − D),
// inversions counted by the Mahonian recurrence (Kendall, Rank Correlation Methods, 1970).
double exact_p_value(std::int64_t n, std::int64_t discordant) {
  const std::int64_t total = n * (n - 1) / 2;
  const std::int64_t c = std::min(discordant, total - discordant);
  if (n <= 2) return 1.0;
  if (4 * c == n * (n - 1)) return 1.0;
  // counts[k] = number of permutations of j elements with k inversions, for k ≤ c; divided by j
  // at every step so that the last vector holds probabilities.
  std::vector<long double> counts(static_cast<std::size_t>(c) + 1, 0.0L);
  counts[0] = 1.0L;
  for (std::int64_t j = 2; j <= n; ++j) {
    // new[k] = (Σ_{m = max(0, k − j + 1)}^{k} old[m]) / j
    std::vector<long double> next(counts.size(), 0.0L);
    long double running = 0.0L;
    for (std::size_t k = 0; k < counts.size(); ++k) {
      running += counts[k];
      if (static_cast<std::int64_t>(k) >= j) running -= counts[k - static_cast<std::size_t>(j)];
      next[k] = running / static_cast<long double>(j);
    }
    counts.swap(next);
  }
  long double tail = 0.0L;
  for (long double p : counts) tail += p;
  return std::min(1.0, static_cast<double>(2.0L * tail));
}

}  // namespace

KendallTauResult kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) {
    throw InputError("kendall_tau_b: x has " + std::to_string(x.size()) + " values but y has " +
                     std::to_string(y.size()));
  }
  if (x.size() < 2) {
    throw InputError("kendall_tau_b: need at least 2 pairs, got " + std::to_string(x.size()));
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
      throw InputError("kendall_tau_b: pair " + std::to_string(i) + " is not finite");
    }
  }
  KendallTauResult result;
  const auto n = static_cast<std::int64_t>(x.size());
  result.n = n;
  for (std::size_t i = 0; i < x.size(); ++i) {
    for (std::size_t j = i + 1; j < x.size(); ++j) {
      const double dx = x[i] - x[j];
      const double dy = y[i] - y[j];
      if (dx == 0 || dy == 0) continue;
      if ((dx > 0) == (dy > 0)) {
        ++result.concordant;
      } else {
        ++result.discordant;
      }
    }
  }
  const TieSums tx = tie_sums(x);
  const TieSums ty = tie_sums(y);
  const auto total = static_cast<double>(n * (n - 1) / 2);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (tx.pairs == total || ty.pairs == total) {
    result.tau_b = nan;
    result.p_value = nan;
    return result;
  }
  const auto c_minus_d = static_cast<double>(result.concordant - result.discordant);
  result.tau_b =
      std::clamp(c_minus_d / std::sqrt(total - tx.pairs) / std::sqrt(total - ty.pairs), -1.0, 1.0);
  const bool no_ties = tx.pairs == 0 && ty.pairs == 0;
  const std::int64_t total_pairs = n * (n - 1) / 2;
  if (no_ties && (n <= 33 || std::min(result.discordant, total_pairs - result.discordant) <= 1)) {
    result.exact_p = true;
    result.p_value = exact_p_value(n, result.discordant);
    return result;
  }
  const auto size = static_cast<double>(n);
  const double m = size * (size - 1);
  const double var = (m * (2 * size + 5) - tx.variance - ty.variance) / 18 +
                     (2 * tx.pairs * ty.pairs) / m + tx.cubic * ty.cubic / (9 * m * (size - 2));
  const double z = c_minus_d / std::sqrt(var);
  result.p_value = std::erfc(std::fabs(z) / std::sqrt(2.0));
  return result;
}

}  // namespace kvaudit::stats
