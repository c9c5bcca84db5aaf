// Static, cost-aware sharding of units over ranks: longest-processing-time (LPT) assignment.
//
// Every rank computes the same assignment from the same inputs (the remaining work items and the
// world size); no communication is needed (docs/design/hpc.md §Static sharding). Algorithm (Graham
// 1969, LPT):
//   1. sort the items by estimated cost, descending; ties broken by unit id, ascending;
//   2. give each item, in that order, to the rank with the least assigned cost so far (ties: the
//      lowest rank).
// The makespan is at most (4/3 − 1/(3m)) × optimal for m ranks. Each rank then runs its items in
// the order they were assigned, i.e. longest first, so out-of-memory failures show up early
// (lm-evaluation-harness does the same). The assignment changes with the rank count; the records
// do not, because a cell's result depends only on the cell (docs/design/protocols.md §Units and
// cells).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvaudit::run {

// One schedulable unit of work: a unit with the cells of it that remain to be done.
struct WorkItem {
  std::uint64_t unit_id = 0;  // the tie-break; must be unique among the items
  std::size_t index = 0;      // caller's handle (e.g. index into Expansion::units), passed through
  double cost = 0;            // estimated cost, finite and >= 0
};

struct ShardAssignment {
  // per_rank[r]: the items of rank r in execution order (cost descending, unit id ascending).
  std::vector<std::vector<WorkItem>> per_rank;
  std::vector<double> load;  // per rank: the sum of its items' costs
  double makespan() const;   // the largest load (0 for no items)
};

// The LPT assignment of `items` over `ranks` ranks. Throws InternalError if ranks < 1, a cost is
// negative or not finite, or two items share a unit id.
ShardAssignment assign_longest_first(std::span<const WorkItem> items, int ranks);

// The items in LPT order (cost descending, unit id ascending): the order assignment uses.
std::vector<WorkItem> longest_first_order(std::span<const WorkItem> items);

}  // namespace kvaudit::run
