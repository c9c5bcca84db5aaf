// The members of schema version 6 (cell_record.h, docs/RECORDS.md §Versions): the reuse protocol's
// question / n_questions and decode-time compression's final_kv_bytes / decode_compressions
// round-trip, the Protocol enum gains `reuse` (stored 2) in version-6 files only, the record digest
// covers the new members from version 6 on only, and a published shard of schema version 5
// (tests/golden/records/schema5) still reads and verifies, each record question 0 of 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "suite/records/record_digest.h"
#include "suite/records/record_schema.h"
#include "suite/records/shard_reader.h"
#include "suite/records/shard_writer.h"
#include "tests/records/record_formula.h"
#include "tests/records/test_support.h"

namespace kvaudit::records {
namespace {

using testing::formula_record;
using testing::TempDir;

TEST(Schema6Members, ReuseRecordsOfOneCellRoundTripAsDistinctQuestions) {
  TempDir dir;
  std::vector<CellRecord> in;
  for (std::uint32_t question = 0; question < 4; ++question) {
    CellRecord r = formula_record(3, 0, 1);  // the same cell four times
    r.protocol = Protocol::reuse;
    r.question = question;
    r.n_questions = 4;
    r.final_kv_bytes = 4096u * (question + 1);
    r.decode_compressions = 7 * question;
    r.shared_costs = kSharedPrefill | kSharedSelect | kSharedEvict;
    in.push_back(r);
  }
  ShardWriter writer(testing::test_writer_options(dir.path(), 0, 0, 2));
  for (const CellRecord& r : in) writer.append(r);
  const auto out = read_shard(writer.close_and_publish()).records;
  ASSERT_EQ(out.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    testing::expect_same_record(out[i], in[i]);
    testing::expect_same_costs(out[i], in[i]);
    testing::expect_same_schema6_members(out[i], in[i]);
    EXPECT_EQ(enum_name(out[i].protocol), "reuse");
  }
}

TEST(Schema6Members, TheReuseProtocolIsStoredAsTwoAndTheOldValuesNeverMove) {
  EXPECT_EQ(enum_stored_value(Protocol::query_aware), 0);
  EXPECT_EQ(enum_stored_value(Protocol::query_agnostic), 1);
  EXPECT_EQ(enum_stored_value(Protocol::reuse), 2);
  EXPECT_EQ(kSharedSelect, 1u << 5);
  EXPECT_EQ(kSharedEvict, 1u << 6);
}

TEST(Schema6Members, RecordDigestCoversThemFromVersion6On) {
  const CellRecord r = formula_record(5, 0, 1);
  const std::uint64_t v6 = record_digest(r, 6);
  const std::uint64_t v5 = record_digest(r, 5);
  // question, n_questions, decode_compressions (4 bytes each) and final_kv_bytes (8).
  EXPECT_EQ(record_digest_message(r, 6).size(), record_digest_message(r, 5).size() + 3 * 4 + 8);
  for (auto change :
       {+[](CellRecord& c) { c.question += 1; }, +[](CellRecord& c) { c.n_questions += 1; },
        +[](CellRecord& c) { c.final_kv_bytes ^= 1; },
        +[](CellRecord& c) { c.decode_compressions += 1; }}) {
    CellRecord changed = r;
    change(changed);
    EXPECT_NE(record_digest(changed, 6), v6);
    EXPECT_EQ(record_digest(changed, 5), v5);
  }
}

// tests/golden/records/README.md: a published shard written by the schema-5 build.
TEST(Schema6Members, ASchemaFiveShardStillReadsAndVerifiesAsQuestionZeroOfOne) {
  TempDir dir;
  const StudyRecords study = read_study(testing::copy_golden_shard(
      dir.path(), "schema5", "part-local.0.t0.a1.pid4242.5c4e3a05-r0.s0.h5"));
  ASSERT_EQ(study.published.size(), 1u);
  EXPECT_EQ(study.published[0].provenance.schema_version, 5);
  ASSERT_EQ(study.records.size(), 12u);
  for (std::size_t i = 0; i < study.records.size(); ++i) {
    const CellRecord& got = study.records[i];
    const CellRecord want = formula_record(2 + i, 0, 1);
    testing::expect_same_record(got, want);
    testing::expect_same_costs(got, want);
    EXPECT_EQ(got.question, 0u);
    EXPECT_EQ(got.n_questions, 1u);
    EXPECT_EQ(got.final_kv_bytes, 0u);
    EXPECT_EQ(got.decode_compressions, 0u);
    EXPECT_EQ(record_digest(got, 5), record_digest(want, 5)) << i;
  }
}

}  // namespace
}  // namespace kvaudit::records
