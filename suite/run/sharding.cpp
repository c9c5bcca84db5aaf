// LPT assignment of units to ranks (see sharding.h).
#include "suite/run/sharding.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/errors.h"

namespace kvaudit::run {

double ShardAssignment::makespan() const {
  return load.empty() ? 0.0 : *std::max_element(load.begin(), load.end());
}

std::vector<WorkItem> longest_first_order(std::span<const WorkItem> items) {
  std::vector<WorkItem> sorted(items.begin(), items.end());
  for (const auto& item : sorted) {
    if (!std::isfinite(item.cost) || item.cost < 0) {
      throw InternalError("sharding: unit " + std::to_string(item.unit_id) +
                          " has an invalid cost estimate " + std::to_string(item.cost) +
                          " (must be finite and >= 0)");
    }
  }
  std::sort(sorted.begin(), sorted.end(), [](const WorkItem& a, const WorkItem& b) {
    if (a.cost != b.cost) return a.cost > b.cost;
    return a.unit_id < b.unit_id;
  });
  std::vector<std::uint64_t> ids;
  ids.reserve(sorted.size());
  for (const auto& item : sorted) ids.push_back(item.unit_id);
  std::sort(ids.begin(), ids.end());
  if (const auto dup = std::adjacent_find(ids.begin(), ids.end()); dup != ids.end()) {
    throw InternalError("sharding: unit " + std::to_string(*dup) +
                        " appears twice in the work list");
  }
  return sorted;
}

ShardAssignment assign_longest_first(std::span<const WorkItem> items, int ranks) {
  if (ranks < 1) {
    throw InternalError("sharding: the rank count must be at least 1, got " +
                        std::to_string(ranks));
  }
  ShardAssignment out;
  out.per_rank.resize(static_cast<std::size_t>(ranks));
  out.load.assign(static_cast<std::size_t>(ranks), 0.0);
  for (const auto& item : longest_first_order(items)) {
    // The least-loaded rank; min_element returns the first (lowest) rank among equal loads.
    const auto least = static_cast<std::size_t>(std::min_element(out.load.begin(), out.load.end()) -
                                                out.load.begin());
    out.per_rank[least].push_back(item);
    out.load[least] += item.cost;
  }
  return out;
}

}  // namespace kvaudit::run
