// Per-layer budget helpers (layer_budgets.h).
#include "methods/layer_budgets.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "methods/top_k.h"

namespace kvaudit::methods {

std::vector<std::int64_t> fit_layer_budgets(std::vector<std::int64_t> budgets, std::int64_t total,
                                            std::int64_t floor_value, std::int64_t cap) {
  const auto layers = static_cast<std::int64_t>(budgets.size());
  if (layers == 0 || floor_value > cap || total < layers * floor_value || total > layers * cap) {
    throw std::invalid_argument("fit_layer_budgets: total " + std::to_string(total) +
                                " cannot be split over " + std::to_string(layers) +
                                " layers within [" + std::to_string(floor_value) + ", " +
                                std::to_string(cap) + "]");
  }
  for (auto& b : budgets) b = std::clamp(b, floor_value, cap);
  std::int64_t sum = std::accumulate(budgets.begin(), budgets.end(), std::int64_t{0});
  while (sum != total) {
    const bool grow = sum < total;
    const std::int64_t need = grow ? total - sum : sum - total;
    std::vector<std::size_t> movable;
    for (std::size_t l = 0; l < budgets.size(); ++l) {
      if (grow ? budgets[l] < cap : budgets[l] > floor_value) movable.push_back(l);
    }
    // Non-empty: the total lies within [N·floor_value, N·cap].
    const auto m = static_cast<std::int64_t>(movable.size());
    const std::int64_t each = need / m;
    const std::int64_t extra = need % m;
    for (std::int64_t k = 0; k < m; ++k) {
      std::int64_t& b = budgets[movable[static_cast<std::size_t>(k)]];
      const std::int64_t wanted = each + (k < extra ? 1 : 0);
      const std::int64_t room = grow ? cap - b : b - floor_value;
      const std::int64_t moved = std::min(wanted, room);
      b += grow ? moved : -moved;
      sum += grow ? moved : -moved;
    }
  }
  return budgets;
}

Budget budget_for_kept(std::int64_t length, std::int64_t n) {
  if (length < 1 || n < 1 || n > length)
    throw std::invalid_argument("budget_for_kept: kept " + std::to_string(n) + " outside [1, " +
                                std::to_string(length) + "]");
  double compression = 1.0 - static_cast<double>(n) / static_cast<double>(length);
  compression = std::clamp(compression, 0.0, std::nextafter(1.0, 0.0));
  while (kept_count(length, compression) < n && compression > 0.0)
    compression = std::nextafter(compression, 0.0);
  while (kept_count(length, compression) > n) compression = std::nextafter(compression, 1.0);
  if (kept_count(length, compression) != n)
    throw std::logic_error("budget_for_kept: no ratio keeps exactly " + std::to_string(n));
  return Budget{.compression = compression};
}

std::vector<std::vector<std::int32_t>> top_k_plus_window(std::span<const float> scores,
                                                         int num_kv_heads, int scored, int length,
                                                         std::int64_t n_kept) {
  std::vector<std::vector<std::int32_t>> kept(static_cast<std::size_t>(num_kv_heads));
  const auto p = static_cast<std::size_t>(scored);
  for (int h = 0; h < num_kv_heads; ++h) {
    auto& head = kept[static_cast<std::size_t>(h)];
    head = torch_top_k_positions(scores.subspan(static_cast<std::size_t>(h) * p, p), n_kept);
    for (int j = scored; j < length; ++j) head.push_back(j);
  }
  return kept;
}

}  // namespace kvaudit::methods
