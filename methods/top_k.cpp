// Top-k with a deterministic tie-break (top_k.h).
#include "methods/top_k.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

namespace kvaudit::methods {

std::vector<std::int64_t> top_k_ranked(std::span<const float> scores, std::int64_t k) {
  const auto n = static_cast<std::int64_t>(scores.size());
  k = std::clamp<std::int64_t>(k, 0, n);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  auto better = [&](std::int64_t a, std::int64_t b) {
    return ranks_before(scores[static_cast<std::size_t>(a)], a, scores[static_cast<std::size_t>(b)],
                        b);
  };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
  order.resize(static_cast<std::size_t>(k));
  return order;
}

std::vector<std::int64_t> torch_top_k_ranked(std::span<const float> scores, std::int64_t k) {
  const auto n = static_cast<std::int64_t>(scores.size());
  k = std::clamp<std::int64_t>(k, 0, n);
  if (k == 0) return {};
  using Entry = std::pair<float, std::int64_t>;
  std::vector<Entry> queue(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j)
    queue[static_cast<std::size_t>(j)] = {scores[static_cast<std::size_t>(j)], j};
  auto larger = [](const Entry& x, const Entry& y) {
    return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
  };
  if (k * 64 <= n) {
    std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), larger);
  } else {
    std::nth_element(queue.begin(), queue.begin() + (k - 1), queue.end(), larger);
    std::sort(queue.begin(), queue.begin() + (k - 1), larger);
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(k));
  for (std::int64_t i = 0; i < k; ++i)
    order[static_cast<std::size_t>(i)] = queue[static_cast<std::size_t>(i)].second;
  return order;
}

std::vector<std::int32_t> top_k_positions(std::span<const float> scores, std::int64_t k) {
  const auto ranked = top_k_ranked(scores, k);
  std::vector<std::int32_t> kept(ranked.begin(), ranked.end());
  std::sort(kept.begin(), kept.end());
  return kept;
}

std::vector<std::int32_t> torch_top_k_positions(std::span<const float> scores, std::int64_t k) {
  const auto ranked = torch_top_k_ranked(scores, k);
  std::vector<std::int32_t> kept(ranked.begin(), ranked.end());
  std::sort(kept.begin(), kept.end());
  return kept;
}

void protect_with_max_plus_one(std::span<float> scores, std::int64_t length, std::int64_t begin,
                               std::int64_t end) {
  if (begin >= end) return;
  const auto n = static_cast<std::int64_t>(scores.size());
  auto is_protected = [&](std::int64_t i) {
    const std::int64_t j = i % length;
    return j >= begin && j < end;
  };
  float max_score = -std::numeric_limits<float>::infinity();
  bool any = false;
  for (std::int64_t i = 0; i < n; ++i) {
    if (is_protected(i)) continue;
    const float v = scores[static_cast<std::size_t>(i)];
    if (!any || v > max_score) max_score = v;
    any = true;
  }
  // A layer made only of protected tokens: they all get the same value and rank by position.
  const float value = any ? max_score + 1.0f : 1.0f;
  for (std::int64_t i = 0; i < n; ++i)
    if (is_protected(i)) scores[static_cast<std::size_t>(i)] = value;
}

}  // namespace kvaudit::methods
