// Clopper–Pearson bounds from Boost.Math's inverse regularised incomplete beta (ibeta_inv for the
// lower bound, ibetac_inv — the complement, no 1 − p cancellation — for the upper bound), as
// statsmodels' proportion_confint(method='beta') does with beta.ppf / beta.isf.
#include "statistics/clopper_pearson.h"

#include <boost/math/special_functions/beta.hpp>
#include <cstdio>

#include "base/errors.h"

namespace kvaudit::stats {
namespace {

void require_counts(std::int64_t successes, std::int64_t trials, const char* function) {
  if (trials < 1) {
    throw InputError(std::string(function) + ": trials must be >= 1, got " +
                     std::to_string(trials));
  }
  if (successes < 0 || successes > trials) {
    throw InputError(std::string(function) + ": successes must be in [0, trials = " +
                     std::to_string(trials) + "], got " + std::to_string(successes));
  }
}

void require_alpha(double alpha, const char* function) {
  if (!(alpha > 0.0 && alpha < 1.0)) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.17g", alpha);
    throw InputError(std::string(function) + ": alpha must be in (0, 1), got " + buffer);
  }
}

// Lower bound at one-sided level a: the a-quantile of Beta(x, n − x + 1).
double lower_bound(std::int64_t x, std::int64_t n, double a) {
  if (x == 0) return 0.0;
  return boost::math::ibeta_inv(static_cast<double>(x), static_cast<double>(n - x + 1), a);
}

// Upper bound at one-sided level a: the (1 − a)-quantile of Beta(x + 1, n − x).
double upper_bound(std::int64_t x, std::int64_t n, double a) {
  if (x == n) return 1.0;
  return boost::math::ibetac_inv(static_cast<double>(x + 1), static_cast<double>(n - x), a);
}

}  // namespace

ProportionInterval clopper_pearson_interval(std::int64_t successes, std::int64_t trials,
                                            double alpha, const Family& family) {
  require_counts(successes, trials, "clopper_pearson_interval");
  require_alpha(alpha, "clopper_pearson_interval");
  if (family.m < 1) {
    throw InputError("clopper_pearson_interval: family '" + family.name +
                     "' must have m >= 1, got " + std::to_string(family.m));
  }
  ProportionInterval interval;
  interval.successes = successes;
  interval.trials = trials;
  interval.estimate = static_cast<double>(successes) / static_cast<double>(trials);
  interval.family_alpha = alpha;
  interval.per_interval_alpha = alpha / family.m;
  interval.family = family.name;
  interval.m = family.m;
  interval.lower = lower_bound(successes, trials, interval.per_interval_alpha / 2);
  interval.upper = upper_bound(successes, trials, interval.per_interval_alpha / 2);
  return interval;
}

double clopper_pearson_upper_bound(std::int64_t successes, std::int64_t trials, double alpha) {
  require_counts(successes, trials, "clopper_pearson_upper_bound");
  require_alpha(alpha, "clopper_pearson_upper_bound");
  return upper_bound(successes, trials, alpha);
}

double clopper_pearson_lower_bound(std::int64_t successes, std::int64_t trials, double alpha) {
  require_counts(successes, trials, "clopper_pearson_lower_bound");
  require_alpha(alpha, "clopper_pearson_lower_bound");
  return lower_bound(successes, trials, alpha);
}

}  // namespace kvaudit::stats
