// The sequential phase of the rank loop (suite/run/rank_loop.h, RankLoopOptions::sequential) in a
// world of one with a fake executor and a fake exchange: the calibration units run first in the
// scheduler's waves, the remainder goes to `reassign`, dropped cells are never run nor counted as
// remaining; a stop request from another rank (through the exchange) ends the waves and leaves the
// cells still to run counted; a failure of the wave body is returned, not thrown, after the stop
// has gone through the exchange.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "base/errors.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/records/shard_reader.h"
#include "suite/run/cell_identity.h"
#include "suite/run/rank_loop.h"
#include "tests/run/sequential_study_text.h"
#include "tests/run_mpi/test_study.h"

namespace kvaudit::run {
namespace {

using testing::fresh_test_dir;

// 2 tasks × 12 instances, 8 + 4 per task → n_max = 16 calibration requests; three knorm
// candidates. With every loss 0, at ε = 0.9 and δ = 0.2 the tests certify after 3 requests.
std::string study_text() {
  run::testing::SequentialStudy study;
  study.seed = 7;
  study.instances = 12;
  study.methods = "\"knorm\"";
  study.block_method = "knorm";
  study.tau = "0.5";
  study.epsilon = "0.9";
  study.delta = "0.2";
  study.calibration = 8;
  study.test = 4;
  return run::testing::sequential_study_text(study);
}

struct Fixture {
  manifest::Manifest manifest = manifest::parse_manifest(study_text(), "seq.toml");
  manifest::Expansion expansion = manifest::expand(manifest);
  std::vector<PendingUnit> pending = pending_units(expansion, {});
  SequentialScheduler scheduler{plan_sequential_calibration(manifest, expansion), expansion,
                                pending};
};

RankLoopOptions options_for(const std::filesystem::path& dir) {
  RankLoopOptions o;
  o.writer.directory = dir;
  records::fill_process_provenance(o.writer.provenance);
  o.writer.provenance.manifest_sha256 = std::string(64, 'a');
  o.writer.provenance.rank = 0;
  o.writer.provenance.world_size = 1;
  o.writer.provenance.attempt = 1;
  o.writer.launch_pid = 4242;
  return o;
}

// Every cell scores 1: no violation.
ExecuteUnit perfect(const manifest::Manifest& m, std::set<std::size_t>* units_run) {
  return [&m, units_run](const manifest::Unit& u, std::span<const manifest::Cell* const> cells) {
    units_run->insert(u.id);
    std::vector<records::CellRecord> out;
    for (const auto* c : cells) {
      auto r = cell_identity_record(m, u, *c);
      r.score = 1.0;
      out.push_back(std::move(r));
    }
    return out;
  };
}

// The identity exchange of a world of one; sets `stop` from wave `stop_at` on (0: never).
WaveExchange fake_exchange(std::size_t* calls, std::size_t stop_at = 0,
                           std::vector<bool>* stops_seen = nullptr) {
  return [=](std::span<const std::size_t>, std::vector<CellOutcome> mine, bool& stop) {
    ++*calls;
    if (stops_seen != nullptr) stops_seen->push_back(stop);
    if (stop_at != 0 && *calls >= stop_at) stop = true;
    return mine;
  };
}

std::vector<WorkItem> all_items(const std::vector<PendingUnit>& units,
                                const manifest::Expansion& e) {
  std::vector<WorkItem> items;
  for (std::size_t i = 0; i < units.size(); ++i) {
    items.push_back({e.units[units[i].unit].id, i, static_cast<double>(units[i].cells.size())});
  }
  return items;
}

TEST(RankLoopSequential, WavesFirstThenTheRemainderWithoutTheDroppedCells) {
  Fixture f;
  const auto out = fresh_test_dir("run");
  std::set<std::size_t> units_run;
  std::size_t exchanges = 0, reassigned = 0;
  auto options = options_for(out);
  options.sequential = SequentialPhase{&f.scheduler, fake_exchange(&exchanges),
                                       [&](const std::vector<PendingUnit>& remaining) {
                                         ++reassigned;
                                         return all_items(remaining, f.expansion);
                                       }};
  const auto result = run_rank_loop(f.manifest, f.expansion, f.pending, {},
                                    perfect(f.manifest, &units_run), std::move(options));
  ASSERT_FALSE(result.error);
  EXPECT_FALSE(result.stopped);
  EXPECT_EQ(reassigned, 1u);
  EXPECT_EQ(result.sequential_waves, exchanges);
  // Certified after 3 requests; waves of one unit: exactly 3 calibration units ran in waves.
  const auto& cands = f.scheduler.candidates(0);
  for (const auto& c : cands) {
    EXPECT_EQ(c.decision, stats::SequentialDecision::certified);
    EXPECT_EQ(c.requests_used, 3);
  }
  EXPECT_EQ(exchanges, 3u);
  const auto dropped = f.scheduler.dropped_cells();
  EXPECT_EQ(dropped.size(), 3u * (16 - 3));
  EXPECT_EQ(result.cells_written, f.expansion.cells.size() - dropped.size());
  EXPECT_EQ(result.cells_assigned, result.cells_written);
  EXPECT_EQ(result.cells_remaining(), 0u);
  EXPECT_EQ(result.units_done, f.expansion.units.size());
  EXPECT_EQ(units_run.size(), f.expansion.units.size());
  // The shard holds every cell but the dropped ones.
  const auto shard = records::read_shard(result.published);
  std::set<std::uint64_t> recorded;
  for (const auto& r : shard.records) recorded.insert(r.cell_id);
  EXPECT_EQ(recorded.size(), shard.records.size());
  for (std::size_t c = 0; c < f.expansion.cells.size(); ++c) {
    const bool is_dropped = std::binary_search(dropped.begin(), dropped.end(), c);
    EXPECT_EQ(recorded.count(f.expansion.cells[c].id), is_dropped ? 0u : 1u) << "cell " << c;
  }
}

TEST(RankLoopSequential, AStopFromAnotherRankEndsTheWavesAndCountsTheCellsLeft) {
  Fixture f;
  const auto out = fresh_test_dir("run");
  std::set<std::size_t> units_run;
  std::size_t exchanges = 0, reassigned = 0;
  auto options = options_for(out);
  options.sequential = SequentialPhase{&f.scheduler, fake_exchange(&exchanges, 2),
                                       [&](const std::vector<PendingUnit>& remaining) {
                                         ++reassigned;
                                         return all_items(remaining, f.expansion);
                                       }};
  const auto result = run_rank_loop(f.manifest, f.expansion, f.pending, {},
                                    perfect(f.manifest, &units_run), std::move(options));
  ASSERT_FALSE(result.error);
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(reassigned, 0u);
  EXPECT_EQ(exchanges, 2u);
  EXPECT_EQ(units_run.size(), 2u);
  EXPECT_EQ(result.cells_written, 2u * 4u);
  // Nothing decided yet: every other cell is still to run, rank 0 carries them.
  EXPECT_TRUE(f.scheduler.dropped_cells().empty());
  EXPECT_EQ(result.cells_remaining(), f.expansion.cells.size() - 8u);
  EXPECT_TRUE(std::filesystem::exists(result.published));
}

TEST(RankLoopSequential, AFailureInAWaveIsReturnedAfterTheStopWentThroughTheExchange) {
  Fixture f;
  const auto out = fresh_test_dir("run");
  std::size_t exchanges = 0, reassigned = 0;
  std::vector<bool> stops;
  auto options = options_for(out);
  options.sequential = SequentialPhase{&f.scheduler, fake_exchange(&exchanges, 0, &stops),
                                       [&](const std::vector<PendingUnit>& remaining) {
                                         ++reassigned;
                                         return all_items(remaining, f.expansion);
                                       }};
  // The executor answers for the wrong cells: check_records_match throws InternalError.
  const ExecuteUnit wrong = [&](const manifest::Unit& u,
                                std::span<const manifest::Cell* const> cells) {
    std::vector<records::CellRecord> records;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      records.push_back(cell_identity_record(f.manifest, u, *cells[(i + 1) % cells.size()]));
    }
    return records;
  };
  RankLoopResult result;
  ASSERT_NO_THROW(result = run_rank_loop(f.manifest, f.expansion, f.pending, {}, wrong, options));
  ASSERT_TRUE(result.error);
  EXPECT_THROW(std::rethrow_exception(result.error), InternalError);
  EXPECT_EQ(reassigned, 0u);
  // Wave 1 failed; the rank asked to stop at wave 2 (without running it), and the waves ended.
  ASSERT_EQ(stops.size(), 2u);
  EXPECT_FALSE(stops[0]);
  EXPECT_TRUE(stops[1]);
  EXPECT_EQ(result.cells_written, 0u);
}

TEST(RankLoopSequential, IncompleteOptionsAreAnInternalError) {
  Fixture f;
  const auto out = fresh_test_dir("run");
  std::set<std::size_t> units_run;
  auto options = options_for(out);
  options.sequential = SequentialPhase{&f.scheduler, {}, {}};
  const auto result = run_rank_loop(f.manifest, f.expansion, f.pending, {},
                                    perfect(f.manifest, &units_run), std::move(options));
  ASSERT_TRUE(result.error);
  EXPECT_THROW(std::rethrow_exception(result.error), InternalError);
  EXPECT_TRUE(units_run.empty());
}

}  // namespace
}  // namespace kvaudit::run
