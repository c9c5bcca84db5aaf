// Power and sample size of the binomial LTT test. See certification_power.h.
#include "statistics/certification_power.h"

#include <algorithm>
#include <string>

#include "base/errors.h"
#include "statistics/argument_checks.h"
#include "statistics/binomial.h"

namespace kvaudit::stats {
double certification_power(std::int64_t n, double epsilon, double delta, double rate) {
  if (n < 1 || n > kMaxTrials) {
    throw InputError("certification_power: n must be in [1, 2^53 = " + std::to_string(kMaxTrials) +
                     "], got " + std::to_string(n));
  }
  require_open_unit(epsilon, "epsilon", "certification_power");
  require_open_unit(delta, "delta", "certification_power");
  if (!(rate >= 0.0 && rate <= 1.0)) {
    throw InputError("certification_power: rate (true violation rate) must be in [0, 1], got " +
                     exact_text(rate));
  }
  const std::int64_t k_star = max_certifiable_violations(n, epsilon, delta);
  return k_star < 0 ? 0.0 : binomial_cdf(n, rate, k_star);
}

SampleSize certification_sample_size(double epsilon, double delta, double rate, double target_power,
                                     std::int64_t n_max) {
  const char* function = "certification_sample_size";
  require_open_unit(epsilon, "epsilon", function);
  require_open_unit(delta, "delta", function);
  if (!(rate >= 0.0 && rate < epsilon)) {
    throw InputError(std::string(function) +
                     ": rate (true violation rate) must be in [0, epsilon = " +
                     exact_text(epsilon) + "), got " + exact_text(rate) +
                     " (at rate >= epsilon the certification probability never exceeds delta)");
  }
  require_open_unit(target_power, "target power", function);
  if (n_max < 1 || n_max > kMaxSampleSizeSearch) {
    throw InputError(std::string(function) + ": n_max must be in [1, " +
                     std::to_string(kMaxSampleSizeSearch) + "], got " + std::to_string(n_max));
  }
  SampleSize out;
  out.n_max = n_max;
  std::int64_t k_star = -1;  // K*(n) for the current n, updated incrementally
  for (std::int64_t n = 1; n <= n_max; ++n) {
    // K*(n) ∈ {K*(n−1), K*(n−1) + 1} (certification_power.h): try one step up.
    const std::int64_t next = k_star + 1;
    if (next <= violation_cap(n, epsilon) - 1 && binomial_cdf(n, epsilon, next) <= delta) {
      k_star = next;
    }
    const double power = k_star < 0 ? 0.0 : binomial_cdf(n, rate, k_star);
    if (power >= target_power) {
      if (!out.found) {
        out.found = true;
        out.n = n;
        out.power = power;
        out.k_star = k_star;
      }
      if (out.stable_n == 0) {
        out.stable_n = n;
        out.stable_power = power;
        out.stable_k_star = k_star;
        out.min_power_after = power;
      }
      out.min_power_after = std::min(out.min_power_after, power);
    } else {
      out.stable_n = 0;
      out.stable_power = 0;
      out.stable_k_star = -1;
      out.min_power_after = 0;
    }
    if (n == n_max) out.power_at_n_max = power;
  }
  return out;
}

}  // namespace kvaudit::stats
