// The Pareto front of (cost, accuracy) points: the points no other point dominates, where q
// dominates p when q costs no more and is no less accurate, and is strictly better in one of the
// two (q.cost ≤ p.cost, q.accuracy ≥ p.accuracy, and q.cost < p.cost or q.accuracy > p.accuracy).
// So duplicates (equal cost and accuracy) are on the front together or not at all, and of points
// with equal cost only the most accurate can be on it. A point with a NaN coordinate is never on
// the front and dominates nothing.
#pragma once

#include <span>
#include <vector>

namespace kvaudit::reduce {

struct ParetoPoint {
  double cost = 0;      // lower is better (bytes, milliseconds)
  double accuracy = 0;  // higher is better
};

// on_front[i] for every point, in input order. O(n log n).
std::vector<bool> pareto_front(std::span<const ParetoPoint> points);

}  // namespace kvaudit::reduce
