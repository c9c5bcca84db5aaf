// Hoeffding–Bentkus p-values and the Waudby-Smith–Ramdas betting bound for [0, 1]-bounded losses.
// See bounded_loss.h for the formulas, the sources and why each is valid.
#include "statistics/bounded_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "base/errors.h"
#include "statistics/argument_checks.h"
#include "statistics/binomial.h"

namespace kvaudit::stats {
namespace {

void require_hb_inputs(double r_hat, std::int64_t n, double alpha, const char* function) {
  if (!(r_hat >= 0.0 && r_hat <= 1.0)) {
    throw InputError(std::string(function) + ": r_hat (mean loss) must be in [0, 1], got " +
                     exact_text(r_hat));
  }
  if (n < 1 || n > kMaxTrials) {
    throw InputError(std::string(function) + ": n must be in [1, 2^53 = " +
                     std::to_string(kMaxTrials) + "], got " + std::to_string(n));
  }
  require_open_unit(alpha, "alpha", function);
}

void require_losses(const std::vector<double>& losses, const std::string& what) {
  if (losses.empty()) throw InputError(what + ": no losses (an empty column)");
  for (std::size_t i = 0; i < losses.size(); ++i) {
    const double x = losses[i];
    if (!std::isfinite(x) || x < 0.0 || x > 1.0) {
      throw InputError(what + ": loss " + std::to_string(i) + " is " + exact_text(x) +
                       " (losses must be finite and in [0, 1])");
    }
  }
}

// h1(a, b) = a·log(a/b) + (1 − a)·log((1 − a)/(1 − b)), 0·log 0 = 0; a in [0, b], b in (0, 1).
double h1(double a, double b) {
  const double first = a == 0.0 ? 0.0 : a * std::log(a / b);
  const double second = (1.0 - a) * (std::log1p(-a) - std::log1p(-b));
  return std::max(0.0, first + second);  // ≥ 0 exactly; rounding never makes p^H exceed 1
}

// ⌈n·r̂⌉ with the 1e-9 guard of bounded_loss.h.
std::int64_t bentkus_count(double r_hat, std::int64_t n) {
  const double x = static_cast<double>(n) * r_hat;
  const auto k = static_cast<std::int64_t>(std::ceil(x - 1e-9));
  return std::clamp<std::int64_t>(k, 0, n);
}

// The predictable WSR bets ν_1..ν_n of bounded_loss.h (tuned at bet_delta).
std::vector<double> wsr_bets(const std::vector<double>& x, double bet_delta) {
  const auto n = static_cast<double>(x.size());
  const double log_term = 2.0 * std::log(1.0 / bet_delta);
  std::vector<double> nu(x.size());
  double sum = 0.0;               // Σ_{j≤i} x_j
  double squares = 0.0;           // Σ_{j≤i} (x_j − μ̂_j)²
  double sigma2_previous = 0.25;  // σ̂²_{i−1}, σ̂²_0 = 1/4
  for (std::size_t i = 0; i < x.size(); ++i) {
    nu[i] = std::min(1.0, std::sqrt(log_term / (n * sigma2_previous)));
    const auto t = static_cast<double>(i + 1);
    sum += x[i];
    const double mu = (0.5 + sum) / (t + 1.0);
    const double d = x[i] - mu;
    squares += d * d;
    sigma2_previous = (0.25 + squares) / (t + 1.0);
  }
  return nu;
}

// F(R) = max_{0≤t≤n} Σ_{i≤t} log(1 − ν_i (x_i − R)); −∞ factors (ν = 1, x = 1, R = 0) stop the
// sum (the capital is 0 from there on).
double log_capital(const std::vector<double>& x, const std::vector<double>& nu, double r) {
  double running = 0.0;
  double best = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double factor = 1.0 - nu[i] * (x[i] - r);
    if (!(factor > 0.0)) break;
    running += std::log(factor);
    best = std::max(best, running);
  }
  return best;
}

}  // namespace

double hoeffding_p_value(double r_hat, std::int64_t n, double alpha) {
  require_hb_inputs(r_hat, n, alpha, "hoeffding_p_value");
  return std::exp(-static_cast<double>(n) * h1(std::min(r_hat, alpha), alpha));
}

double bentkus_p_value(double r_hat, std::int64_t n, double alpha) {
  require_hb_inputs(r_hat, n, alpha, "bentkus_p_value");
  return std::numbers::e * binomial_cdf(n, alpha, bentkus_count(r_hat, n));
}

double hoeffding_bentkus_p_value(double r_hat, std::int64_t n, double alpha) {
  require_hb_inputs(r_hat, n, alpha, "hoeffding_bentkus_p_value");
  return std::min(hoeffding_p_value(r_hat, n, alpha), bentkus_p_value(r_hat, n, alpha));
}

double wsr_log_capital(const std::vector<double>& losses, double r, double bet_delta) {
  require_losses(losses, "wsr_log_capital");
  if (!(r >= 0.0 && r <= 1.0)) {
    throw InputError("wsr_log_capital: r (the tested mean) must be in [0, 1], got " +
                     exact_text(r));
  }
  require_open_unit(bet_delta, "bet_delta", "wsr_log_capital");
  return log_capital(losses, wsr_bets(losses, bet_delta), r);
}

double wsr_upper_bound(const std::vector<double>& losses, double delta) {
  require_losses(losses, "wsr_upper_bound");
  require_open_unit(delta, "delta", "wsr_upper_bound");
  const std::vector<double> nu = wsr_bets(losses, delta);
  const double threshold = std::log(1.0 / delta);
  if (log_capital(losses, nu, 1.0) < threshold) return 1.0;
  // F(0) = 0 < threshold (every factor is ≤ 1 at R = 0), F(1) ≥ threshold: bisect on [0, 1]
  // keeping F(lo) < threshold ≤ F(hi) until lo and hi are adjacent doubles.
  double lo = 0.0;
  double hi = 1.0;
  for (int iteration = 0; iteration < 200; ++iteration) {
    const double mid = lo + 0.5 * (hi - lo);
    if (mid <= lo || mid >= hi) break;
    if (log_capital(losses, nu, mid) >= threshold) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

double wsr_p_value(const std::vector<double>& losses, double alpha, double bet_delta) {
  require_losses(losses, "wsr_p_value");
  require_open_unit(alpha, "alpha", "wsr_p_value");
  require_open_unit(bet_delta, "bet_delta", "wsr_p_value");
  return std::exp(-log_capital(losses, wsr_bets(losses, bet_delta), alpha));
}

double mean_loss(const std::vector<double>& losses, const std::string& what) {
  require_losses(losses, what);
  double sum = 0.0;
  for (const double x : losses) sum += x;
  return std::min(1.0, sum / static_cast<double>(losses.size()));
}

double joint_p_value(const std::vector<double>& per_risk) {
  if (per_risk.empty()) throw InputError("joint_p_value: no per-risk p-values");
  double p = 0.0;
  for (std::size_t i = 0; i < per_risk.size(); ++i) {
    if (!(per_risk[i] >= 0.0 && per_risk[i] <= 1.0)) {
      throw InputError("joint_p_value: p-value " + std::to_string(i) + " is " +
                       exact_text(per_risk[i]) + " (must be in [0, 1])");
    }
    p = std::max(p, per_risk[i]);
  }
  return p;
}

}  // namespace kvaudit::stats
