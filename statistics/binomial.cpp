// Binomial tails (Boost.Math), the LTT p-value with the ⌊nε⌋ − 1 guard, and K* by bisection over
// the monotone cdf. See binomial.h for the formulas and docs/design/statistics.md §Certification
// for why.
#include "statistics/binomial.h"

#include <boost/math/distributions/binomial.hpp>
#include <cmath>
#include <string>

#include "base/errors.h"
#include "statistics/argument_checks.h"

namespace kvaudit::stats {
namespace {

const std::string kMaxTrialsText = "2^53 = " + std::to_string(kMaxTrials);

void require_trials(std::int64_t trials, const char* function) {
  if (trials < 0 || trials > kMaxTrials) {
    throw InputError(std::string(function) + ": trials must be in [0, " + kMaxTrialsText +
                     "] (binomial tails are computed in double precision), got " +
                     std::to_string(trials));
  }
}

void require_successes(std::int64_t trials, std::int64_t successes, const char* function) {
  if (successes < 0 || successes > trials) {
    throw InputError(std::string(function) + ": successes must be in [0, trials = " +
                     std::to_string(trials) + "], got " + std::to_string(successes));
  }
}

void require_calibration_size(std::int64_t n, const char* function) {
  if (n < 1 || n > kMaxTrials) {
    throw InputError(std::string(function) + ": n (calibration requests) must be in [1, " +
                     kMaxTrialsText + "] (binomial tails are computed in double precision), got " +
                     std::to_string(n));
  }
}

double unchecked_cdf(std::int64_t trials, double probability, std::int64_t successes) {
  const boost::math::binomial_distribution<double> distribution(static_cast<double>(trials),
                                                                probability);
  return boost::math::cdf(distribution, static_cast<double>(successes));
}

}  // namespace

double binomial_cdf(std::int64_t trials, double probability, std::int64_t successes) {
  require_trials(trials, "binomial_cdf");
  require_successes(trials, successes, "binomial_cdf");
  require_probability(probability, "probability", "binomial_cdf");
  return unchecked_cdf(trials, probability, successes);
}

double binomial_upper_tail(std::int64_t trials, double probability, std::int64_t successes) {
  require_trials(trials, "binomial_upper_tail");
  require_successes(trials, successes, "binomial_upper_tail");
  require_probability(probability, "probability", "binomial_upper_tail");
  if (successes == 0) return 1.0;
  const boost::math::binomial_distribution<double> distribution(static_cast<double>(trials),
                                                                probability);
  // P{X ≥ k} = P{X > k − 1}.
  return boost::math::cdf(
      boost::math::complement(distribution, static_cast<double>(successes - 1)));
}

std::int64_t violation_cap(std::int64_t n, double epsilon) {
  require_calibration_size(n, "violation_cap");
  require_open_unit(epsilon, "epsilon", "violation_cap");
  return static_cast<std::int64_t>(std::floor(static_cast<double>(n) * epsilon + 1e-9));
}

double ltt_p_value(std::int64_t n, double epsilon, std::int64_t violations) {
  require_calibration_size(n, "ltt_p_value");
  require_open_unit(epsilon, "epsilon", "ltt_p_value");
  require_successes(n, violations, "ltt_p_value");
  if (violations > violation_cap(n, epsilon) - 1) return 1.0;
  return unchecked_cdf(n, epsilon, violations);
}

std::int64_t max_certifiable_violations(std::int64_t n, double epsilon, double delta) {
  require_calibration_size(n, "max_certifiable_violations");
  require_open_unit(epsilon, "epsilon", "max_certifiable_violations");
  require_open_unit(delta, "delta", "max_certifiable_violations");
  // p(K) is non-decreasing in K (a cdf up to ⌊nε⌋ − 1, then 1 > δ): bisect for the last K with
  // p(K) ≤ δ. Invariant: p(low) ≤ δ, and p(high) > δ or high = ⌊nε⌋ (where the guard gives 1).
  const std::int64_t last_guarded = violation_cap(n, epsilon) - 1;
  if (last_guarded < 0 || unchecked_cdf(n, epsilon, 0) > delta) return -1;
  std::int64_t low = 0;
  std::int64_t high = last_guarded + 1;
  while (high - low > 1) {
    const std::int64_t middle = low + (high - low) / 2;
    if (unchecked_cdf(n, epsilon, middle) <= delta) {
      low = middle;
    } else {
      high = middle;
    }
  }
  return low;
}

}  // namespace kvaudit::stats
