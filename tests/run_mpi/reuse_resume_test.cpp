// The reuse protocol's records in read_study and the resume scan (records schema 6): a reuse cell
// writes one record per question, all with its cell_id, so records are unique by (cell_id,
// question) — its k records are not duplicates of each other, a second record of the same
// (cell, question) is — and a reuse cell is done only when every one of its questions is
// recorded (a partial set leaves the cell pending; its rerun repeats the recorded questions as
// identical duplicates, counted once).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/records/provenance.h"
#include "suite/records/shard_reader.h"
#include "suite/records/shard_writer.h"
#include "suite/run/resume.h"
#include "tests/run_mpi/test_study.h"

namespace kvaudit::run {
namespace {

using testing::fresh_test_dir;

const std::string kManifest = "{\"study\":\"reuse-resume\"}\n";

records::CellRecord record(std::uint64_t cell, std::uint32_t question, std::uint32_t n_questions) {
  records::CellRecord r;
  r.cell_id = cell;
  r.unit_id = 77;
  r.attempt = 1;
  r.status = records::CellStatus::ok;
  r.model = "m";
  r.benchmark = "ruler";
  r.task = "niah_multiquery";
  r.method = "snapkv";
  r.method_id = "snapkv";
  r.protocol = n_questions > 1 ? Protocol::reuse : Protocol::query_agnostic;
  r.question = question;
  r.n_questions = n_questions;
  r.score = 1.0;
  r.output = "answer " + std::to_string(question);
  return r;
}

std::filesystem::path publish(const std::filesystem::path& shards, int rank, std::uint32_t seq,
                              const std::vector<records::CellRecord>& rows) {
  records::ShardWriterOptions o;
  o.directory = shards;
  records::fill_process_provenance(o.provenance);
  o.provenance.manifest_sha256 = sha256_hex(kManifest);
  o.provenance.rank = rank;
  o.provenance.attempt = 1;
  o.launch_pid = 4242;
  o.launch_id = "0a1b2c3d";
  o.seq = seq;
  records::ShardWriter writer(o);
  for (const auto& r : rows) writer.append(r);
  return writer.close_and_publish();
}

constexpr std::uint64_t kComplete = 0x1111, kPartial = 0x2222, kPlain = 0x3333;

std::vector<records::CellRecord> first_run() {
  std::vector<records::CellRecord> rows;
  for (std::uint32_t j = 0; j < 4; ++j) rows.push_back(record(kComplete, j, 4));
  for (std::uint32_t j = 0; j < 2; ++j) rows.push_back(record(kPartial, j, 4));  // 2 of 4
  rows.push_back(record(kPlain, 0, 1));
  return rows;
}

TEST(ReuseResume, AReuseCellsQuestionsAreDistinctRecordsAndOnlyCompleteCellsAreDone) {
  const auto dir = fresh_test_dir();
  const auto shards = dir / "shards";
  publish(shards, 0, 0, first_run());

  const records::StudyRecords study = records::read_study(shards);
  EXPECT_EQ(study.records.size(), 7u);
  EXPECT_TRUE(study.duplicates.empty());

  const ResumeScan scan = scan_for_resume(shards, sha256_hex(kManifest), ResumeOptions{});
  EXPECT_EQ(scan.done_cells, (std::vector<std::uint64_t>{kComplete, kPlain}));
  ASSERT_EQ(scan.done_records.size(), 2u);
  EXPECT_EQ(scan.done_records[0].cell_id, kComplete);
  EXPECT_EQ(scan.done_records[0].question, 0u);
  EXPECT_EQ(scan.done_records[0].n_questions, 4u);
}

TEST(ReuseResume, TheRerunOfAPartialCellCompletesItAndItsRepeatsAreDuplicates) {
  const auto dir = fresh_test_dir();
  const auto shards = dir / "shards";
  publish(shards, 0, 0, first_run());
  std::vector<records::CellRecord> rerun;
  for (std::uint32_t j = 0; j < 4; ++j) rerun.push_back(record(kPartial, j, 4));
  publish(shards, 1, 0, rerun);

  const records::StudyRecords study = records::read_study(shards);
  EXPECT_EQ(study.records.size(), 9u);  // 4 + 4 + 1
  ASSERT_EQ(study.duplicates.size(), 2u);
  EXPECT_EQ(study.duplicates[0].cell_id, kPartial);
  EXPECT_EQ(study.duplicates[0].question, 0u);
  EXPECT_EQ(study.duplicates[1].question, 1u);
  const ResumeScan scan = scan_for_resume(shards, sha256_hex(kManifest), ResumeOptions{});
  EXPECT_EQ(scan.done_cells, (std::vector<std::uint64_t>{kComplete, kPartial, kPlain}));
}

TEST(ReuseResume, TwoDifferentRecordsOfOneQuestionAreAConflictNamingTheQuestion) {
  const auto dir = fresh_test_dir();
  const auto shards = dir / "shards";
  publish(shards, 0, 0, first_run());
  records::CellRecord other = record(kComplete, 2, 4);
  other.output = "another answer";
  publish(shards, 1, 0, {other});
  try {
    records::read_study(shards);
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cell " + std::to_string(kComplete) + " question 2"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvaudit::run
