// The Pareto front of (cost, accuracy) points (see pareto_front.h).
#include "suite/reduce/pareto_front.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>

namespace kvaudit::reduce {

std::vector<bool> pareto_front(std::span<const ParetoPoint> points) {
  std::vector<bool> on_front(points.size(), false);
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!std::isnan(points[i].cost) && !std::isnan(points[i].accuracy)) order.push_back(i);
  }
  // Cheapest first; among equal costs the most accurate first.
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (points[a].cost != points[b].cost) return points[a].cost < points[b].cost;
    return points[a].accuracy > points[b].accuracy;
  });
  // Sweep: a point is on the front when it is more accurate than everything cheaper, or ties the
  // best of its own cost group (which is then on the front) exactly.
  double best_cheaper = -std::numeric_limits<double>::infinity();  // over strictly lower costs
  std::size_t group = 0;
  while (group < order.size()) {
    std::size_t end = group;
    while (end < order.size() && points[order[end]].cost == points[order[group]].cost) ++end;
    const double group_best = points[order[group]].accuracy;
    for (std::size_t k = group; k < end; ++k) {
      const double accuracy = points[order[k]].accuracy;
      on_front[order[k]] = accuracy == group_best && accuracy > best_cheaper;
    }
    best_cheaper = std::max(best_cheaper, group_best);
    group = end;
  }
  return on_front;
}

}  // namespace kvaudit::reduce
