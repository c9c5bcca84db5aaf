// Integrity of records (schema 3): the SHA-256 sidecar checked before parsing, per-record digests,
// reads of unverified shards isolated in a child process, duplicates whose content differs, and
// failed records replaced by a later attempt (--retry-failed).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "base/errors.h"
#include "suite/records/isolated_read.h"
#include "suite/records/record_comparison.h"
#include "suite/records/record_digest.h"
#include "suite/records/shard_checksum.h"
#include "suite/records/shard_reader.h"
#include "tests/records/test_support.h"

namespace kvaudit::records {
namespace {

using testing::contains;
using testing::file_bytes;
using testing::formula_record;
using testing::input_error_of;
using testing::publish_formula_shard;
using testing::reseal;
using testing::TempDir;
using testing::test_writer_options;
using testing::write_bytes;

// Replaces the first occurrence of `from`'s 8 bytes in the file by `to`'s (a value edited in place
// without going through HDF5: what a flipped bit in a number does).
void replace_double_in_file(const std::filesystem::path& file, double from, double to) {
  std::string bytes = file_bytes(file);
  char want[8], with[8];
  std::memcpy(want, &from, 8);
  std::memcpy(with, &to, 8);
  const auto at = bytes.find(std::string(want, 8));
  ASSERT_NE(at, std::string::npos) << "value not found in " << file;
  bytes.replace(at, 8, std::string(with, 8));
  write_bytes(file, bytes);
}

TEST(RecordDigest, IsTheSha256PrefixOfTheDocumentedSerialisation) {
  CellRecord r;
  r.cell_id = 0x0102030405060708ULL;
  r.model = "m";
  const std::string message = record_digest_message(r);
  // cell_id little-endian first, then unit_id (0), attempt, rank (0), status (one byte)...
  ASSERT_GE(message.size(), 25U);
  EXPECT_EQ(static_cast<unsigned char>(message[0]), 0x08);
  EXPECT_EQ(static_cast<unsigned char>(message[7]), 0x01);
  // ... then the model as u64 length 1 + "m".
  EXPECT_EQ(message.substr(25, 9), std::string("\x01\0\0\0\0\0\0\0m", 9));
  EXPECT_EQ(record_digest(r), digest_prefix_u64(sha256(message)));
  // Every field takes part: change one and the digest changes.
  CellRecord s = r;
  s.score = 0.5;
  EXPECT_NE(record_digest(r), record_digest(s));
  s = r;
  s.output = "x";
  EXPECT_NE(record_digest(r), record_digest(s));
}

TEST(ShardChecksum, PublishWritesASha256sumSidecarThatVerifies) {
  TempDir dir;
  const auto shard = publish_formula_shard(dir.path(), 0, 0, 0, 8);
  const std::string sidecar = file_bytes(checksum_path(shard));
  EXPECT_EQ(sidecar, to_hex(sha256_file(shard)) + "  " + shard.filename().string() + "\n");
  EXPECT_EQ(verify_shard_checksum(shard).status, ChecksumStatus::verified);
}

TEST(ShardChecksum, AFlippedByteIsRefusedBeforeParsingNamingTheFile) {
  TempDir dir;
  const auto shard = publish_formula_shard(dir.path(), 0, 0, 0, 8);
  std::string bytes = file_bytes(shard);
  bytes[100] = static_cast<char>(bytes[100] ^ 0x10);
  write_bytes(shard, bytes);
  const std::string message = input_error_of([&] { read_study(dir.path()); });
  EXPECT_TRUE(contains(message, shard.string() + ": SHA-256 ")) << message;
  EXPECT_TRUE(contains(message, "the shard changed after it was published")) << message;
  EXPECT_TRUE(contains(message, "--salvage-corrupt")) << message;
}

TEST(ShardChecksum, AMissingSidecarOfASchema3ShardIsRefused) {
  TempDir dir;
  const auto shard = publish_formula_shard(dir.path(), 0, 0, 0, 8);
  std::filesystem::remove(checksum_path(shard));
  const std::string message = input_error_of([&] { read_study(dir.path()); });
  EXPECT_TRUE(contains(message, "no checksum file")) << message;
  EXPECT_TRUE(contains(message, "schema version 3")) << message;
}

TEST(ShardChecksum, AMalformedSidecarIsRefused) {
  TempDir dir;
  const auto shard = publish_formula_shard(dir.path(), 0, 0, 0, 8);
  write_bytes(checksum_path(shard), "not a checksum\n");
  const std::string message = input_error_of([&] { read_study(dir.path()); });
  EXPECT_TRUE(contains(message, "is not one line")) << message;
}

TEST(ShardChecksum, AnOrphanSidecarIsAWarning) {
  TempDir dir;
  publish_formula_shard(dir.path(), 0, 0, 0, 8);
  write_bytes(dir / "part-orphan.h5.sha256", std::string(64, 'a') + "  part-orphan.h5\n");
  const StudyRecords study = read_study(dir.path());
  EXPECT_EQ(study.records.size(), 8U);
  EXPECT_TRUE(std::any_of(study.warnings.begin(), study.warnings.end(), [](const auto& w) {
    return contains(w, "part-orphan.h5.sha256: checksum file without its shard");
  }));
}

// Replaces the first occurrence of `from` in the file by `to` (same length).
void replace_text_in_file(const std::filesystem::path& file, const std::string& from,
                          const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::string bytes = file_bytes(file);
  const auto at = bytes.find(from);
  ASSERT_NE(at, std::string::npos) << "'" << from << "' not found in " << file;
  bytes.replace(at, from.size(), to);
  write_bytes(file, bytes);
}

// A flipped in-range score (0.3125 → 1) behind a checksum that was made to match: the fletcher32
// filter refuses the chunk (before: the report changed and the exit code was 0).
TEST(Fletcher32, AnEditedScoreIsRefusedEvenWithAMatchingSidecar) {
  TempDir dir;
  const auto shard = publish_formula_shard(dir.path(), 0, 0, 0, 8);
  ASSERT_EQ(formula_record(5, 0, 1).score, 0.3125);
  replace_double_in_file(shard, 0.3125, 1.0);
  reseal(shard);
  const std::string message = input_error_of([&] { read_study(dir.path()); });
  EXPECT_TRUE(contains(message, shard.string() + ": reading /records failed")) << message;
  EXPECT_TRUE(contains(message, "Fletcher32")) << message;

  // --salvage-corrupt re-reads the chunk without the filter check and keeps every record whose
  // digest matches: all but the edited one.
  write_bytes(checksum_path(shard), std::string(64, '0') + "  " + shard.filename().string() + "\n");
  StudyReadOptions options;
  options.salvage_corrupt = true;
  const StudyRecords study = read_study(dir.path(), options);
  EXPECT_EQ(study.records.size(), 7U);
  ASSERT_EQ(study.published.size(), 1U);
  EXPECT_EQ(study.published[0].verification, ShardVerification::salvaged);
  EXPECT_EQ(study.published[0].n_dropped, 1U);
  for (const auto& r : study.records) EXPECT_NE(r.cell_id, formula_record(5, 0, 1).cell_id);
}

// Strings live in HDF5's global heap, which fletcher32 does not cover: the record digest does.
TEST(RecordDigest, AnEditedStringIsRefusedEvenWithAMatchingSidecar) {
  TempDir dir;
  const auto shard = publish_formula_shard(dir.path(), 0, 0, 0, 8);
  replace_text_in_file(shard, "answer 6:", "answer 9:");
  reseal(shard);
  const std::string message = input_error_of([&] { read_study(dir.path()); });
  EXPECT_TRUE(contains(message, shard.string() + ": record 6 (cell ")) << message;
  EXPECT_TRUE(contains(message, "does not match its record_digest")) << message;
}

TEST(RecordDigest, SalvageOfATemporaryShardDropsEditedRecords) {
  TempDir dir;
  const auto temp = testing::leave_crashed_temp_shard(dir.path(), 0, 0, 0, 40, 8);
  replace_double_in_file(temp, 0.3125, 1.0);             // g = 5: fletcher32, then its digest
  replace_text_in_file(temp, "answer 6:", "answer 9:");  // g = 6: its digest
  StudyReadOptions options;
  options.salvage = true;
  const StudyRecords study = read_study(dir.path(), options);
  ASSERT_EQ(study.temporary.size(), 1U);
  EXPECT_EQ(study.temporary[0].outcome, TempShardOutcome::salvaged);
  EXPECT_EQ(study.temporary[0].n_dropped, 2U);
  EXPECT_EQ(study.records.size(), 38U);
  EXPECT_TRUE(std::any_of(study.warnings.begin(), study.warnings.end(),
                          [](const auto& w) { return contains(w, "2 damaged, left out"); }));
}

TEST(IsolatedRead, ReadsAGoodShardAndReportsARefusalOrATimeout) {
  TempDir dir;
  const auto shard = publish_formula_shard(dir.path(), 0, 0, 0, 8);
  EXPECT_EQ(probe_shard_isolated(shard, ShardReadMode::published, std::chrono::seconds(30)).outcome,
            ProbeOutcome::readable);
  EXPECT_EQ(
      read_shard_isolated(shard, ShardReadMode::published, std::chrono::seconds(30)).records.size(),
      8U);
  write_bytes(dir / "part-bogus.h5", "not HDF5");
  const ProbeResult refused = probe_shard_isolated(dir / "part-bogus.h5", ShardReadMode::published,
                                                   std::chrono::seconds(30));
  EXPECT_EQ(refused.outcome, ProbeOutcome::refused);
  EXPECT_TRUE(contains(refused.message, "not an HDF5 file")) << refused.message;
  const ProbeResult late =
      probe_shard_isolated(shard, ShardReadMode::published, std::chrono::milliseconds(0));
  EXPECT_EQ(late.outcome, ProbeOutcome::timed_out);
  EXPECT_TRUE(contains(late.message, shard.string() + ": reading it did not finish"))
      << late.message;
}

// One record of cell g with its fields changed by `edit`, published in a shard of its own.
template <typename Edit>
std::filesystem::path publish_edited(const TempDir& dir, int rank, std::uint64_t g, int attempt,
                                     Edit edit) {
  auto options = test_writer_options(dir.path(), rank, 0, 4);
  options.provenance.attempt = attempt;
  ShardWriter writer(options);
  CellRecord r = formula_record(g, 0, attempt);
  edit(r);
  writer.append(r);
  return writer.close_and_publish();
}

TEST(Duplicates, IdenticalContentIsANoteEvenWhenWhoAndWhenDiffer) {
  TempDir dir;
  publish_formula_shard(dir.path(), 0, 0, 0, 4);
  publish_edited(dir, 1, 2, 1, [](CellRecord& r) {
    r.rank = 1;
    r.t_start_ns += 5;
    r.decode_ms = 99;
  });
  const StudyRecords study = read_study(dir.path());
  EXPECT_EQ(study.records.size(), 4U);
  EXPECT_EQ(study.duplicates.size(), 1U);
}

TEST(Duplicates, DifferingContentIsAnErrorNamingBothShardsAndTheFields) {
  TempDir dir;
  const auto first = publish_formula_shard(dir.path(), 0, 0, 0, 4);
  const auto second = publish_edited(dir, 1, 0, 1, [](CellRecord& r) {
    r.score = 1.0;
    r.output = "another answer";
  });
  const std::string message = input_error_of([&] { read_study(dir.path()); });
  EXPECT_TRUE(contains(message, "1 cell(s) have records that disagree")) << message;
  EXPECT_TRUE(contains(message, first.string())) << message;
  EXPECT_TRUE(contains(message, second.string())) << message;
  EXPECT_TRUE(contains(message, "differ in score, output")) << message;
}

TEST(Duplicates, AFailedRecordIsReplacedByALaterAttemptsRetry) {
  TempDir dir;
  // g = 2 has status error (g % 5 == 2) in attempt 1; attempt 2 records it as ok.
  ASSERT_EQ(formula_record(2, 0, 1).status, CellStatus::error);
  const auto failed = publish_formula_shard(dir.path(), 0, 0, 0, 4);
  const auto retry = publish_edited(dir, 1, 2, 2, [](CellRecord& r) {
    r.status = CellStatus::ok;
    r.error.clear();
    r.score = 1.0;
  });
  const StudyRecords study = read_study(dir.path());
  ASSERT_EQ(study.records.size(), 4U);
  ASSERT_EQ(study.retried.size(), 1U);
  EXPECT_EQ(study.retried[0].failed_file, failed);
  EXPECT_EQ(study.retried[0].retry_file, retry);
  const auto it = std::find_if(study.records.begin(), study.records.end(), [](const auto& r) {
    return r.cell_id == formula_record(2, 0, 1).cell_id;
  });
  ASSERT_NE(it, study.records.end());
  EXPECT_EQ(it->status, CellStatus::ok);
  EXPECT_EQ(it->attempt, 2);
  EXPECT_TRUE(study.duplicates.empty());
}

TEST(Duplicates, AnOkRecordIsNeverReplacedByADifferentOne) {
  TempDir dir;
  ASSERT_EQ(formula_record(0, 0, 1).status, CellStatus::ok);
  publish_formula_shard(dir.path(), 0, 0, 0, 4);
  publish_edited(dir, 1, 0, 2, [](CellRecord& r) { r.score = 0.75; });
  EXPECT_TRUE(contains(input_error_of([&] { read_study(dir.path()); }), "differ in score"));
}

TEST(Comparison, WhoAndWhenFieldsAreNotContent) {
  CellRecord a = formula_record(3, 0, 1);
  CellRecord b = a;
  b.attempt = 7;
  b.rank = 3;
  b.t_start_ns = 1;
  b.t_end_ns = 2;
  b.prefill_ms = 1;
  b.decode_ms = 2;
  EXPECT_TRUE(differing_content_fields(a, b).empty());
  b.kept_bytes += 1;
  EXPECT_EQ(differing_content_fields(a, b), std::vector<std::string>{"kept_bytes"});
}

TEST(Salvage, ATemporaryShardRepublishedEarlierIsNotWarnedAbout) {
  TempDir dir;
  const auto temp = testing::leave_crashed_temp_shard(dir.path(), 0, 0, 0, 16, 8);
  auto options = test_writer_options(dir.path(), 0, 1, 4);
  options.provenance.salvaged_from = temp.filename().string() + "\n";
  ShardWriter writer(options);
  for (std::uint64_t g = 0; g < 16; ++g) writer.append(formula_record(g, 0, 1));
  writer.close_and_publish();
  const StudyRecords study = read_study(dir.path());
  ASSERT_EQ(study.temporary.size(), 1U);
  EXPECT_EQ(study.temporary[0].republished_in.filename(),
            std::filesystem::path(writer.final_path()).filename());
  EXPECT_TRUE(study.warnings.empty()) << study.warnings.front();
}

}  // namespace
}  // namespace kvaudit::records
