// Tests of the resume scan (suite/run/resume.h) on synthetic shards: a first run, a complete
// study, a lost shard, a dead rank's .tmp shard salvaged and republished without double counting,
// attempts, and a shard of another manifest.
#include "suite/run/resume.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "base/errors.h"
#include "suite/records/shard_reader.h"
#include "tests/run_mpi/test_study.h"

namespace kvaudit::run {
namespace {

using testing::fresh_test_dir;
using testing::load_test_study;

records::ShardWriterOptions writer_options(const testing::LoadedTestStudy& s, int rank, int attempt,
                                           std::int64_t pid) {
  records::ShardWriterOptions o;
  o.directory = s.study.results_dir / "shards";
  records::fill_process_provenance(o.provenance);
  o.provenance.manifest_sha256 = s.study.manifest_sha256;
  o.provenance.rank = rank;
  o.provenance.attempt = attempt;
  o.launch_pid = pid;
  o.flush_every = 3;
  return o;
}

TEST(Resume, NoShardDirectoryMeansNothingDone) {
  const auto dir = fresh_test_dir();
  const auto scan = scan_for_resume(dir / "absent", std::string(64, 'a'));
  EXPECT_TRUE(scan.done_cells.empty());
  EXPECT_EQ(scan.previous_attempts, 0);
  EXPECT_EQ(scan.published_shards, 0u);
}

TEST(Resume, CompleteStudyLeavesNothingPending) {
  const auto s = load_test_study(fresh_test_dir(), 2);
  const auto scan = scan_for_resume(s.study.results_dir / "shards", s.study.manifest_sha256);
  EXPECT_EQ(scan.published_shards, 2u);
  EXPECT_EQ(scan.done_cells.size(), s.expansion.cells.size());
  EXPECT_TRUE(std::is_sorted(scan.done_cells.begin(), scan.done_cells.end()));
  EXPECT_EQ(scan.previous_attempts, 1);
  EXPECT_TRUE(scan.salvaged.empty());
  std::size_t unknown = 99;
  EXPECT_TRUE(pending_units(s.expansion, scan.done_cells, &unknown).empty());
  EXPECT_EQ(unknown, 0u);
}

TEST(Resume, LostShardBecomesPendingUnitsWithExactlyItsCells) {
  const auto s = load_test_study(fresh_test_dir(), 3);
  const auto shards = records::list_shards(s.study.results_dir / "shards").published;
  ASSERT_EQ(shards.size(), 3u);
  const auto lost = records::read_shard(shards[1]);
  std::filesystem::remove(shards[1]);

  const auto scan = scan_for_resume(s.study.results_dir / "shards", s.study.manifest_sha256);
  const auto pending = pending_units(s.expansion, scan.done_cells);
  std::set<std::uint64_t> pending_cells;
  std::set<std::uint64_t> pending_unit_ids;
  for (const auto& p : pending) {
    pending_unit_ids.insert(s.expansion.units[p.unit].id);
    EXPECT_TRUE(std::is_sorted(p.cells.begin(), p.cells.end()));
    for (std::size_t c : p.cells) pending_cells.insert(s.expansion.cells[c].id);
  }
  std::set<std::uint64_t> lost_cells, lost_units;
  for (const auto& r : lost.records) {
    lost_cells.insert(r.cell_id);
    lost_units.insert(r.unit_id);
  }
  EXPECT_EQ(pending_cells, lost_cells);
  EXPECT_EQ(pending_unit_ids, lost_units);
}

TEST(Resume, DeadRankTmpShardIsSalvagedOnceAndRepublished) {
  const auto s = load_test_study(fresh_test_dir(), 2);
  const auto shards_dir = s.study.results_dir / "shards";
  auto shards = records::list_shards(shards_dir).published;
  const auto lost = records::read_shard(shards[0]);
  std::filesystem::remove(shards[0]);
  ASSERT_GE(lost.records.size(), 8u);

  // Attempt 2, rank 1 leaves a .tmp with 7 records: 6 cells of the lost shard and one cell that a
  // published shard already holds (it must not be counted twice).
  const auto kept = records::read_shard(records::list_shards(shards_dir).published[0]);
  {
    records::ShardWriter dying(writer_options(s, 1, 2, 777));
    for (std::size_t i = 0; i < 5; ++i) {
      auto r = lost.records[i];
      r.attempt = 2;
      dying.append(r);
    }
    auto again = kept.records[0];
    again.attempt = 2;
    dying.append(again);
    dying.append(lost.records[5]);
    // Destroyed without close_and_publish: flushed, closed, never published (the .tmp stays).
  }
  ASSERT_EQ(records::list_shards(shards_dir).temporary.size(), 1u);

  const auto scan = scan_for_resume(shards_dir, s.study.manifest_sha256);
  EXPECT_EQ(scan.salvaged.size(), 6u) << "7 flushed, of which 1 already published";
  EXPECT_EQ(scan.previous_attempts, 2);
  EXPECT_EQ(scan.temporary_shards, 1u);
  EXPECT_EQ(scan.done_cells.size(), kept.records.size() + 6);
  ASSERT_FALSE(scan.messages.empty());

  // Rank 0 of attempt 3 republishes the salvaged records.
  const auto published =
      publish_salvaged_records(scan.salvaged, scan.salvaged_from, writer_options(s, 0, 3, 888));
  EXPECT_TRUE(std::filesystem::exists(published));
  const auto rescan = scan_for_resume(shards_dir, s.study.manifest_sha256);
  EXPECT_TRUE(rescan.salvaged.empty()) << "the .tmp adds nothing any more";
  EXPECT_EQ(rescan.done_cells, scan.done_cells);
  EXPECT_EQ(rescan.duplicate_records, 0u);
  EXPECT_EQ(rescan.previous_attempts, 3);

  // The reader counts every cell once, with or without salvage.
  records::StudyReadOptions with_salvage;
  with_salvage.salvage = true;
  const auto study = records::read_study(shards_dir, with_salvage);
  EXPECT_EQ(study.records.size(), scan.done_cells.size());
  EXPECT_TRUE(study.duplicates.empty());
  const auto pending = pending_units(s.expansion, rescan.done_cells);
  std::size_t pending_cells = 0;
  for (const auto& p : pending) pending_cells += p.cells.size();
  EXPECT_EQ(pending_cells, lost.records.size() - 6);
}

// --retry-failed: oom/error records stay pending; their retries (a later attempt) replace them.
TEST(Resume, RetryFailedLeavesFailedCellsPendingAndTheRetryReplacesThem) {
  const auto s = load_test_study(fresh_test_dir(), 2);
  const auto shards_dir = s.study.results_dir / "shards";
  // The study's records rewritten as attempt 1 in a directory of their own, three of them as
  // error records (a failed first attempt).
  const auto fresh = fresh_test_dir("retry");
  const auto copy = fresh / "shards";
  std::filesystem::create_directories(copy);
  const auto all = records::read_study(shards_dir).records;
  ASSERT_GE(all.size(), 4u);
  {
    auto o = writer_options(s, 0, 1, 11);
    o.directory = copy;
    records::ShardWriter w(o);
    for (std::size_t i = 0; i < all.size(); ++i) {
      auto r = all[i];
      r.attempt = 1;
      if (i < 3) {
        r.status = records::CellStatus::error;
        r.error = "unit failed: planted";
      }
      w.append(r);
    }
    w.close_and_publish();
  }
  const auto plain = scan_for_resume(copy, s.study.manifest_sha256);
  EXPECT_EQ(plain.done_cells.size(), all.size()) << "failed cells count as done by default";
  ResumeOptions retry;
  retry.retry_failed = true;
  const auto scan = scan_for_resume(copy, s.study.manifest_sha256, retry);
  EXPECT_EQ(scan.failed_to_retry, 3u);
  EXPECT_EQ(scan.done_cells.size(), all.size() - 3);
  // The retry (attempt 2) records them as ok; the study then holds each cell once, the retry's.
  {
    auto o = writer_options(s, 0, 2, 12);
    o.directory = copy;
    records::ShardWriter w(o);
    for (std::size_t i = 0; i < 3; ++i) {
      auto r = all[i];
      r.attempt = 2;
      w.append(r);
    }
    w.close_and_publish();
  }
  const auto after = scan_for_resume(copy, s.study.manifest_sha256, retry);
  EXPECT_EQ(after.failed_to_retry, 0u);
  EXPECT_EQ(after.done_cells.size(), all.size());
  const auto study = records::read_study(copy);
  EXPECT_EQ(study.records.size(), all.size());
  EXPECT_EQ(study.retried.size(), 3u);
}

TEST(Resume, ShardOfAnotherManifestIsRefused) {
  const auto s = load_test_study(fresh_test_dir(), 2);
  EXPECT_THROW(scan_for_resume(s.study.results_dir / "shards", std::string(64, 'f')), InputError);
}

}  // namespace
}  // namespace kvaudit::run
