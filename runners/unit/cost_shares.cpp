// Splitting shared step times into per-cell shares (see cost_shares.h).
#include "runners/unit/cost_shares.h"

#include <numeric>

namespace kvaudit::unit {

std::vector<double> equal_shares(double total, std::size_t count) {
  return std::vector<double>(count, count > 0 ? total / static_cast<double>(count) : 0.0);
}

std::vector<double> proportional_shares(double total, std::span<const std::size_t> weights) {
  const std::size_t sum = std::accumulate(weights.begin(), weights.end(), std::size_t{0});
  if (sum == 0) return equal_shares(total, weights.size());
  std::vector<double> shares;
  shares.reserve(weights.size());
  for (const std::size_t weight : weights) {
    shares.push_back(total * static_cast<double>(weight) / static_cast<double>(sum));
  }
  return shares;
}

void add_step_share(std::span<double> shares, std::span<const std::size_t> alive, double seconds) {
  if (alive.empty()) return;
  const double share = seconds / static_cast<double>(alive.size());
  for (const std::size_t i : alive) shares[i] += share;
}

std::vector<double> complete_shares(double total, std::span<const double> measured) {
  std::vector<double> shares(measured.begin(), measured.end());
  if (shares.empty()) return shares;
  const double rest = total - std::accumulate(measured.begin(), measured.end(), 0.0);
  for (double& share : shares) share += rest / static_cast<double>(shares.size());
  return shares;
}

}  // namespace kvaudit::unit
