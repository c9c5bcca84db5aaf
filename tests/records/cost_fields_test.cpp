// The cost members of schema version 5 (cell_record.h, docs/RECORDS.md §Costs): they round-trip,
// every ComputeDevice value survives, the record digest covers them from version 5 on only, and a
// published shard of schema version 4 (tests/golden/records/schema4) still reads and verifies,
// with every cost "unknown" (NaN times, 0 bytes/bits/threads, device unknown).
#include <gtest/gtest.h>

#include <cmath>
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

TEST(CostFields, EveryDeviceAndBitmaskSurvivesARoundTrip) {
  TempDir dir;
  std::vector<CellRecord> in;
  for (const auto& device : EnumTraits<ComputeDevice>::members) {
    CellRecord r = formula_record(in.size(), 0, 1);
    r.device = device.value;
    r.shared_costs =
        kSharedPrefill | kSharedCapture | kSharedExtraPass | kSharedFeed | kSharedDecode;
    r.cell_decode_ms = 1e-300;
    r.peak_kv_bytes = ~std::uint64_t{0};
    r.threads = 1024;
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
  }
  EXPECT_EQ(enum_name(out[2].device), "cuda");
}

TEST(CostFields, RecordDigestCoversThemFromVersion5On) {
  CellRecord r = formula_record(5, 0, 1);  // status ok: every time is a number
  ASSERT_EQ(r.status, CellStatus::ok);
  ASSERT_EQ(r.device, ComputeDevice::cuda);
  const std::uint64_t v5 = record_digest(r, 5);
  const std::uint64_t v4 = record_digest(r, 4);
  // 7 times, peak_kv_bytes (8 bytes each), shared_costs and threads (4 each), device (1).
  EXPECT_EQ(record_digest_message(r, 5).size(), record_digest_message(r, 4).size() + 8 * 8 + 9);
  for (auto change : {+[](CellRecord& c) { c.cell_select_ms += 1; },
                      +[](CellRecord& c) { c.cell_decode_ms = kNotApplicable; },
                      +[](CellRecord& c) { c.peak_kv_bytes ^= 1; },
                      +[](CellRecord& c) { c.shared_costs ^= kSharedFeed; },
                      +[](CellRecord& c) { c.device = ComputeDevice::unknown; },
                      +[](CellRecord& c) { c.threads += 1; }}) {
    CellRecord changed = r;
    change(changed);
    EXPECT_NE(record_digest(changed, 5), v5);
    EXPECT_EQ(record_digest(changed, 4), v4);  // a version-4 record has no such member
  }
}

TEST(CostFields, AnUnreadPodMeansUnknown) {
  const CellRecord r = from_pod(unread_record_pod());
  EXPECT_TRUE(std::isnan(r.cell_prefill_ms));
  EXPECT_TRUE(std::isnan(r.cell_capture_ms));
  EXPECT_TRUE(std::isnan(r.cell_extra_pass_ms));
  EXPECT_TRUE(std::isnan(r.cell_select_ms));
  EXPECT_TRUE(std::isnan(r.cell_evict_ms));
  EXPECT_TRUE(std::isnan(r.cell_feed_ms));
  EXPECT_TRUE(std::isnan(r.cell_decode_ms));
  EXPECT_EQ(r.peak_kv_bytes, 0u);
  EXPECT_EQ(r.shared_costs, 0u);
  EXPECT_EQ(r.device, ComputeDevice::unknown);
  EXPECT_EQ(r.threads, 0);
}

// tests/golden/records/README.md: a published shard written by the schema-4 build.
TEST(CostFields, ASchemaFourShardStillReadsAndVerifiesWithUnknownCosts) {
  TempDir dir;
  const StudyRecords study = read_study(testing::copy_golden_shard(
      dir.path(), "schema4", "part-local.0.t0.a1.pid4242.5c4e3a04-r0.s0.h5"));
  ASSERT_EQ(study.published.size(), 1u);
  EXPECT_EQ(study.published[0].provenance.schema_version, 4);
  ASSERT_EQ(study.records.size(), 12u);
  for (std::size_t i = 0; i < study.records.size(); ++i) {
    const CellRecord& got = study.records[i];
    const CellRecord want = formula_record(2 + i, 0, 1);
    testing::expect_same_record(got, want);
    EXPECT_EQ(got.prompt_digest, want.prompt_digest);
    EXPECT_EQ(got.kept_digest, want.kept_digest);
    testing::expect_same_costs(got, from_pod(unread_record_pod()));
    EXPECT_EQ(record_digest(got, 4), record_digest(want, 4)) << i;
  }
}

}  // namespace
}  // namespace kvaudit::records
