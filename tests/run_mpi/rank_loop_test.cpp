// Tests of the per-rank loop (suite/run/rank_loop.h) with a fake executor: records, flush per unit,
// publishing, unit failures as records, a SIGUSR1 stop within one unit, and the union of records
// over 1, 2 and 3 ranks equal to the single-rank run.
#include "suite/run/rank_loop.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <new>
#include <stdexcept>

#include "suite/records/shard_reader.h"
#include "suite/run/stop_signal.h"
#include "tests/run_mpi/test_study.h"

namespace kvaudit::run {
namespace {

using testing::fake_record;
using testing::fresh_test_dir;
using testing::load_test_study;

struct Plan {
  std::vector<PendingUnit> pending;
  ShardAssignment assignment;
};

Plan plan_all(const testing::LoadedTestStudy& s, int ranks) {
  Plan p;
  p.pending = pending_units(s.expansion, {});
  std::vector<WorkItem> items;
  for (std::size_t i = 0; i < p.pending.size(); ++i) {
    const auto& unit = s.expansion.units[p.pending[i].unit];
    items.push_back({unit.id, i, static_cast<double>(p.pending[i].cells.size() * (1 + unit.task))});
  }
  p.assignment = assign_longest_first(items, ranks);
  return p;
}

RankLoopOptions loop_options(const std::filesystem::path& dir, const testing::LoadedTestStudy& s,
                             int rank, int ranks) {
  RankLoopOptions o;
  o.writer.directory = dir;
  records::fill_process_provenance(o.writer.provenance);
  o.writer.provenance.manifest_sha256 = s.study.manifest_sha256;
  o.writer.provenance.rank = rank;
  o.writer.provenance.world_size = ranks;
  o.writer.provenance.attempt = 1;
  o.writer.launch_pid = 4242;
  return o;
}

ExecuteUnit fake_executor(const manifest::Manifest& m, std::size_t* calls = nullptr) {
  return [&m, calls](const manifest::Unit& u, std::span<const manifest::Cell* const> cells) {
    if (calls) ++*calls;
    std::vector<records::CellRecord> out;
    for (const auto* c : cells) out.push_back(fake_record(m, u, *c));
    return out;
  };
}

TEST(RankLoop, WritesEveryAssignedCellAndPublishes) {
  const auto s = load_test_study(fresh_test_dir("study"), 1);
  const auto out = fresh_test_dir("run");
  const auto plan = plan_all(s, 1);
  std::size_t calls = 0;
  const auto result =
      run_rank_loop(s.manifest, s.expansion, plan.pending, plan.assignment.per_rank[0],
                    fake_executor(s.manifest, &calls), loop_options(out, s, 0, 1));
  EXPECT_EQ(calls, s.expansion.units.size());
  EXPECT_FALSE(result.stopped);
  EXPECT_EQ(result.units_done, s.expansion.units.size());
  EXPECT_EQ(result.cells_written, s.expansion.cells.size());
  EXPECT_EQ(result.cells_remaining(), 0u);
  EXPECT_EQ(result.cells_by_status[0], s.expansion.cells.size());
  ASSERT_TRUE(std::filesystem::exists(result.published));
  const auto shard = records::read_shard(result.published);
  EXPECT_EQ(shard.records.size(), s.expansion.cells.size());
  EXPECT_FALSE(shard.provenance.t_close_utc.empty());
  for (const auto& r : shard.records) {
    EXPECT_EQ(r.rank, 0);
    EXPECT_EQ(r.attempt, 1);
  }
}

TEST(RankLoop, FailingUnitsBecomeRecordsAndTheRankGoesOn) {
  const auto s = load_test_study(fresh_test_dir("study"), 1);
  const auto out = fresh_test_dir("run");
  const auto plan = plan_all(s, 1);
  const auto& order = plan.assignment.per_rank[0];
  const std::uint64_t bad_unit = order[0].unit_id;
  const std::uint64_t oom_unit = order[1].unit_id;
  auto execute = [&](const manifest::Unit& u, std::span<const manifest::Cell* const> cells) {
    if (u.id == bad_unit) throw std::runtime_error("bad instance: no needle");
    if (u.id == oom_unit) throw std::bad_alloc();
    return fake_executor(s.manifest)(u, cells);
  };
  const auto result = run_rank_loop(s.manifest, s.expansion, plan.pending, order, execute,
                                    loop_options(out, s, 0, 1));
  EXPECT_EQ(result.units_done, order.size());
  const auto shard = records::read_shard(result.published);
  std::size_t errors = 0, ooms = 0;
  for (const auto& r : shard.records) {
    if (r.unit_id == bad_unit) {
      ++errors;
      EXPECT_EQ(r.status, records::CellStatus::error);
      EXPECT_EQ(r.error, "unit failed: bad instance: no needle");
      EXPECT_TRUE(std::isnan(r.score));
      EXPECT_FALSE(r.model.empty());
      EXPECT_EQ(r.params_digest.size(), 16u);
    } else if (r.unit_id == oom_unit) {
      ++ooms;
      EXPECT_EQ(r.status, records::CellStatus::oom);
    } else {
      EXPECT_EQ(r.status, records::CellStatus::ok);
    }
  }
  EXPECT_EQ(errors, plan.pending[order[0].index].cells.size());
  EXPECT_EQ(ooms, plan.pending[order[1].index].cells.size());
  EXPECT_EQ(result.cells_by_status[2], errors);
  EXPECT_EQ(result.cells_by_status[1], ooms);
}

TEST(RankLoop, StopSignalEndsTheLoopAfterTheCurrentUnitAndPublishes) {
  const auto s = load_test_study(fresh_test_dir("study"), 1);
  const auto out = fresh_test_dir("run");
  const auto plan = plan_all(s, 1);
  const auto& order = plan.assignment.per_rank[0];
  ASSERT_GE(order.size(), 3u);
  clear_stop_request();
  install_stop_handlers();
  std::size_t calls = 0;
  auto execute = [&](const manifest::Unit& u, std::span<const manifest::Cell* const> cells) {
    if (++calls == 2) ::raise(SIGUSR1);  // arrives in the middle of the second unit
    return fake_executor(s.manifest)(u, cells);
  };
  const auto result = run_rank_loop(s.manifest, s.expansion, plan.pending, order, execute,
                                    loop_options(out, s, 0, 1));
  restore_stop_handlers();
  clear_stop_request();
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.stop_signal, SIGUSR1);
  EXPECT_EQ(calls, 2u);
  EXPECT_EQ(result.units_done, 2u);
  EXPECT_GT(result.cells_remaining(), 0u);
  const auto shard = records::read_shard(result.published);
  EXPECT_EQ(shard.records.size(),
            plan.pending[order[0].index].cells.size() + plan.pending[order[1].index].cells.size());
  EXPECT_TRUE(records::list_shards(out).temporary.empty());
}

TEST(RankLoop, UnionOverOneTwoThreeRanksEqualsTheSingleRankRun) {
  const auto s = load_test_study(fresh_test_dir("study"), 1);
  std::map<int, std::map<std::uint64_t, records::CellRecord>> by_ranks;
  for (int ranks : {1, 2, 3}) {
    const auto out = fresh_test_dir("ranks" + std::to_string(ranks));
    const auto plan = plan_all(s, ranks);
    for (int r = 0; r < ranks; ++r) {
      run_rank_loop(s.manifest, s.expansion, plan.pending,
                    plan.assignment.per_rank[static_cast<std::size_t>(r)],
                    fake_executor(s.manifest), loop_options(out, s, r, ranks));
    }
    const auto study = records::read_study(out);
    EXPECT_TRUE(study.duplicates.empty());
    for (const auto& rec : study.records) by_ranks[ranks][rec.cell_id] = rec;
    EXPECT_EQ(by_ranks[ranks].size(), s.expansion.cells.size()) << ranks << " ranks";
  }
  for (int ranks : {2, 3}) {
    for (const auto& [id, rec] : by_ranks[1]) {
      const auto& other = by_ranks[ranks].at(id);
      EXPECT_EQ(other.output, rec.output);
      EXPECT_EQ(other.method, rec.method);
      EXPECT_EQ(other.score, rec.score);
    }
  }
}

}  // namespace
}  // namespace kvaudit::run
