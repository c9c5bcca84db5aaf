// Tests of the LPT sharding (suite/run/sharding.h): determinism, balance, longest-first order,
// tie-breaks, rank-count independence of the union, invalid input.
#include "suite/run/sharding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "base/errors.h"

namespace kvaudit::run {
namespace {

std::vector<WorkItem> items_with_costs(const std::vector<double>& costs) {
  std::vector<WorkItem> items;
  for (std::size_t i = 0; i < costs.size(); ++i) items.push_back({1000 + i * 7, i, costs[i]});
  return items;
}

std::vector<WorkItem> varied_items(std::size_t n) {
  // Costs like context length × cells: a few lengths, many ties.
  std::vector<WorkItem> items;
  const double lengths[] = {512, 1024, 2048, 4096, 8192};
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = static_cast<std::uint64_t>((i * 2654435761u) % 1000003u);
    items.push_back({id, i, lengths[(i * 7) % 5] * static_cast<double>(1 + (i * 3) % 4)});
  }
  return items;
}

TEST(Sharding, LongestFirstOrderBreaksTiesByUnitId) {
  const std::vector<WorkItem> items = {{30, 0, 5.0}, {10, 1, 5.0}, {20, 2, 9.0}, {5, 3, 1.0}};
  const auto order = longest_first_order(items);
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0].unit_id, 20u);
  EXPECT_EQ(order[1].unit_id, 10u);  // equal cost 5: smaller id first
  EXPECT_EQ(order[2].unit_id, 30u);
  EXPECT_EQ(order[3].unit_id, 5u);
}

TEST(Sharding, GrahamExampleAndPerRankOrder) {
  // Costs 7,6,5,4,4,3,3 on 3 ranks: 7→r0, 6→r1, 5→r2, 4→r2 (9), 4→r1 (10), 3→r0 (10), 3→r2
  // (the least loaded, 9): loads 10, 10, 12 (the optimum is 11: LPT is not exact).
  const auto a = assign_longest_first(items_with_costs({3, 4, 7, 5, 6, 4, 3}), 3);
  ASSERT_EQ(a.per_rank.size(), 3u);
  EXPECT_DOUBLE_EQ(a.load[0], 10);
  EXPECT_DOUBLE_EQ(a.load[1], 10);
  EXPECT_DOUBLE_EQ(a.load[2], 12);
  EXPECT_DOUBLE_EQ(a.makespan(), 12);
  for (const auto& rank_items : a.per_rank) {
    for (std::size_t i = 1; i < rank_items.size(); ++i) {
      EXPECT_GE(rank_items[i - 1].cost, rank_items[i].cost) << "each rank runs longest first";
    }
  }
}

TEST(Sharding, DeterministicWhateverTheInputOrder) {
  auto items = varied_items(200);
  const auto reference = assign_longest_first(items, 5);
  std::mt19937 shuffle_rng(7);
  for (int trial = 0; trial < 5; ++trial) {
    std::shuffle(items.begin(), items.end(), shuffle_rng);
    const auto again = assign_longest_first(items, 5);
    for (std::size_t r = 0; r < 5; ++r) {
      ASSERT_EQ(again.per_rank[r].size(), reference.per_rank[r].size());
      for (std::size_t i = 0; i < again.per_rank[r].size(); ++i) {
        EXPECT_EQ(again.per_rank[r][i].unit_id, reference.per_rank[r][i].unit_id);
      }
    }
  }
}

TEST(Sharding, BalanceWithinGrahamBound) {
  const auto items = varied_items(157);
  double total = 0, largest = 0;
  for (const auto& item : items) {
    total += item.cost;
    largest = std::max(largest, item.cost);
  }
  for (int ranks : {1, 2, 3, 4, 7, 16}) {
    const auto a = assign_longest_first(items, ranks);
    const double lower_bound = std::max(total / ranks, largest);  // no schedule beats this
    const double graham = 4.0 / 3.0 - 1.0 / (3.0 * ranks);
    EXPECT_LE(a.makespan(), graham * lower_bound + 1e-9) << ranks << " ranks";
    EXPECT_NEAR(std::accumulate(a.load.begin(), a.load.end(), 0.0), total, 1e-6);
  }
}

TEST(Sharding, UnionIsEveryItemOnceForAnyRankCount) {
  const auto items = varied_items(61);
  std::set<std::uint64_t> expected;
  for (const auto& item : items) expected.insert(item.unit_id);
  for (int ranks = 1; ranks <= 9; ++ranks) {
    const auto a = assign_longest_first(items, ranks);
    std::multiset<std::uint64_t> seen;
    for (const auto& rank_items : a.per_rank)
      for (const auto& item : rank_items) seen.insert(item.unit_id);
    EXPECT_EQ(seen.size(), items.size()) << ranks << " ranks";
    EXPECT_EQ(std::set<std::uint64_t>(seen.begin(), seen.end()), expected) << ranks << " ranks";
  }
}

TEST(Sharding, MoreRanksThanItemsLeavesIdleRanks) {
  const auto a = assign_longest_first(items_with_costs({2, 1}), 4);
  EXPECT_EQ(a.per_rank[0].size(), 1u);
  EXPECT_EQ(a.per_rank[1].size(), 1u);
  EXPECT_TRUE(a.per_rank[2].empty());
  EXPECT_TRUE(a.per_rank[3].empty());
  EXPECT_TRUE(assign_longest_first({}, 3).per_rank[0].empty());
}

TEST(Sharding, RejectsInvalidInput) {
  EXPECT_THROW(assign_longest_first(items_with_costs({1}), 0), InternalError);
  EXPECT_THROW(assign_longest_first(items_with_costs({1, -2}), 2), InternalError);
  EXPECT_THROW(assign_longest_first(items_with_costs({1, std::nan("")}), 2), InternalError);
  const std::vector<WorkItem> duplicate = {{4, 0, 1.0}, {4, 1, 3.0}};
  EXPECT_THROW(assign_longest_first(duplicate, 2), InternalError);
}

}  // namespace
}  // namespace kvaudit::run
