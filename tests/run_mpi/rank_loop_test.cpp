// Tests of the per-rank loop (suite/run/rank_loop.h) with a fake executor: records, flush per unit,
// publishing, unit failures as records, a SIGUSR1 stop within one unit, and the union of records
// over 1, 2 and 3 ranks equal to the single-rank run.
#include "suite/run/rank_loop.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <stdexcept>

#include "base/errors.h"
#include "suite/records/shard_name.h"
#include "suite/records/shard_reader.h"
#include "suite/run/stop_signal.h"
#include "suite/run/study_lock.h"
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
  // The summary's failure causes: one line per distinct cause, with its count.
  EXPECT_EQ(result.failures.n_failed(), errors + ooms);
  const std::string causes = result.failures.describe();
  EXPECT_NE(
      causes.find("error ×" + std::to_string(errors) + ": unit failed: bad instance: no needle"),
      std::string::npos)
      << causes;
  EXPECT_NE(causes.find("oom ×" + std::to_string(ooms) + ": out of memory while running the unit"),
            std::string::npos)
      << causes;
  // Rank 0 merges every rank's tally from its text form.
  FailureTally merged;
  merged.merge_text(result.failures.to_text());
  merged.merge_text(result.failures.to_text());
  EXPECT_EQ(merged.n_failed(), 2 * (errors + ooms));
}

TEST(FailureTally, KeepsAtMostItsLimitOfCausesAndCountsTheRest) {
  FailureTally tally;
  records::CellRecord r;
  r.status = records::CellStatus::error;
  for (int i = 0; i < 70; ++i) {
    r.error = "cause " + std::to_string(i) + "\twith a tab";
    tally.add(r);
  }
  r.status = records::CellStatus::ok;
  tally.add(r);  // not a failure
  EXPECT_EQ(tally.n_failed(), 70u);
  const std::string text = tally.describe(3);
  EXPECT_NE(text.find("… 67 more failed cell(s)"), std::string::npos) << text;
  EXPECT_EQ(text.find('\t'), std::string::npos) << "tabs are flattened";
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

// A shard that cannot be published (its final name taken while it was written): the loop returns
// the error with the counts of what it wrote, and says those records sit in the .tmp — the run
// summary used to print "0 cell(s) recorded now" here.
TEST(RankLoop, AShardThatCannotBePublishedIsReportedWithItsCounts) {
  const auto s = load_test_study(fresh_test_dir("study"), 1);
  const auto out = fresh_test_dir("run");
  const auto plan = plan_all(s, 1);
  const auto& order = plan.assignment.per_rank[0];
  auto options = loop_options(out, s, 0, 1);
  options.writer.launch_id = "cafe0001";
  const auto final_path = out / records::shard_file_name(records::shard_name_parts_from_environment(
                                    1, options.writer.launch_pid, options.writer.launch_id, 0, 0));
  std::size_t calls = 0;
  auto execute = [&](const manifest::Unit& u, std::span<const manifest::Cell* const> cells) {
    if (++calls == 1) std::ofstream(final_path) << "taken";
    return fake_executor(s.manifest)(u, cells);
  };
  const auto result =
      run_rank_loop(s.manifest, s.expansion, plan.pending, order, execute, std::move(options));
  ASSERT_TRUE(result.error) << "publishing over an existing name must fail";
  EXPECT_TRUE(result.published.empty());
  EXPECT_EQ(result.units_done, order.size());
  EXPECT_GT(result.cells_written, 0u);
  EXPECT_EQ(result.cells_unpublished, result.cells_written);
  EXPECT_EQ(records::list_shards(out).temporary.size(), 1u) << "the records wait in the .tmp";
}

// Ctrl-C and a closed output pipe stop the run like SIGTERM: after the current unit, published.
TEST(RankLoop, SigintAndSigpipeAreCleanStopsToo) {
  for (const int sig : {SIGINT, SIGPIPE}) {
    const auto s = load_test_study(fresh_test_dir("study"), 1);
    const auto out = fresh_test_dir("run");
    const auto plan = plan_all(s, 1);
    const auto& order = plan.assignment.per_rank[0];
    clear_stop_request();
    install_stop_handlers();
    std::size_t calls = 0;
    auto execute = [&](const manifest::Unit& u, std::span<const manifest::Cell* const> cells) {
      if (++calls == 1) ::raise(sig);  // without the handler this ends the test process
      return fake_executor(s.manifest)(u, cells);
    };
    const auto result = run_rank_loop(s.manifest, s.expansion, plan.pending, order, execute,
                                      loop_options(out, s, 0, 1));
    restore_stop_handlers();
    clear_stop_request();
    EXPECT_TRUE(result.stopped) << strsignal(sig);
    EXPECT_EQ(result.stop_signal, sig);
    EXPECT_EQ(result.units_done, 1u);
    EXPECT_FALSE(result.published.empty());
  }
}

TEST(StudyLock, ASecondHolderIsRefusedNamingTheFirstAndTheLockIsFreedOnExit) {
  const auto dir = fresh_test_dir("lock");
  {
    StudyDirectoryLock first(dir);
    // flock() locks belong to open file descriptions: a second open in this process conflicts
    // exactly as another process would.
    try {
      StudyDirectoryLock second(dir);
      ADD_FAILURE() << "the study was locked twice";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find((dir / "run.lock").string() +
                          ": another `kvaudit run` is using this "
                          "study (pid " +
                          std::to_string(::getpid()) + " on "),
                std::string::npos)
          << what;
    }
  }
  StudyDirectoryLock again(dir);  // released with the first holder
  EXPECT_TRUE(std::filesystem::exists(dir / "run.lock"));
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
