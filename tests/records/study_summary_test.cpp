// describe_shard / describe_study: the text reports show provenance, counts by status, shard
// lists, temporary shards and duplicates.
#include "suite/records/study_summary.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "tests/records/test_support.h"

namespace kvaudit::records {
namespace {

using testing::contains;
using testing::leave_crashed_temp_shard;
using testing::publish_formula_shard;
using testing::TempDir;

TEST(DescribeShard, PrintsStateCountsByStatusAndProvenance) {
  TempDir dir;
  const auto a = publish_formula_shard(dir.path(), 3, 0, 0, 12);  // status = g % 5
  std::ostringstream out;
  describe_shard(a, out);
  const std::string text = out.str();
  EXPECT_TRUE(contains(text, "shard: " + a.string())) << text;
  EXPECT_TRUE(contains(text, "state: published")) << text;
  EXPECT_TRUE(contains(text, "records: 12 (n_records attribute 12, /records rows 12)")) << text;
  EXPECT_TRUE(contains(text, "by status: ok=3 oom=3 error=2 excluded=2 abandoned=2")) << text;
  EXPECT_TRUE(contains(text, "  manifest_sha256: " + sha256_hex(testing::kTestManifest))) << text;
  EXPECT_TRUE(contains(text, "  rank: 3\n")) << text;
  EXPECT_TRUE(contains(text, "  rng: philox4x32-10\n")) << text;
  EXPECT_TRUE(contains(text, "manifest_canonical: absent")) << text;
}

TEST(DescribeShard, TemporaryShardIsDescribedAsUnpublished) {
  TempDir dir;
  const auto temp = leave_crashed_temp_shard(dir.path(), 1, 0, 0, 10, 4);
  std::ostringstream out;
  describe_shard(temp, out);
  EXPECT_TRUE(contains(out.str(), "state: unpublished temporary shard")) << out.str();
  EXPECT_TRUE(contains(out.str(), "records: 8 ")) << out.str();
}

TEST(DescribeStudy, ListsShardsTemporariesDuplicatesAndUniqueCells) {
  TempDir dir;
  const auto a = publish_formula_shard(dir.path(), 0, 0, 0, 10);
  const auto b = publish_formula_shard(dir.path(), 1, 0, 5, 15);
  const auto temp = leave_crashed_temp_shard(dir.path(), 2, 0, 100, 110, 4);
  testing::write_bytes(dir / "notes.txt", "x");
  std::ostringstream out;
  describe_study(dir.path(), out);
  const std::string text = out.str();
  EXPECT_TRUE(contains(text, "manifest_sha256: " + sha256_hex(testing::kTestManifest))) << text;
  EXPECT_TRUE(contains(text, "published shards: 2 (20 records)")) << text;
  EXPECT_TRUE(contains(text, "  " + a.filename().string() + ": 10 records, rank 0/1")) << text;
  EXPECT_TRUE(
      contains(text, "  " + b.filename().string() + ": 10 records (5 duplicates), rank 1/1"))
      << text;
  EXPECT_TRUE(contains(text, "temporary shards (unpublished): 1")) << text;
  EXPECT_TRUE(contains(text, "  " + temp.filename().string() + ": 8 flushed records, 8 of them"))
      << text;
  EXPECT_TRUE(contains(text, "  notes.txt")) << text;
  EXPECT_TRUE(contains(text, "duplicates: 5 records")) << text;
  EXPECT_TRUE(contains(text, "unique cells in published shards: 15")) << text;
  EXPECT_TRUE(contains(text, "by status: ok=3 oom=3 error=3 excluded=3 abandoned=3")) << text;
}

TEST(DescribeStudy, PrintsTheErrorInsteadOfThrowingForAMixedStudy) {
  TempDir dir;
  publish_formula_shard(dir.path(), 0, 0, 0, 4);
  const auto b = publish_formula_shard(dir.path(), 1, 0, 4, 8, "{\"other\":true}\n");
  std::ostringstream out;
  EXPECT_NO_THROW(describe_study(dir.path(), out));
  EXPECT_TRUE(contains(out.str(), "ERROR: " + b.string() + ": manifest_sha256")) << out.str();
  EXPECT_TRUE(contains(out.str(), "published shards: 2")) << out.str();
  EXPECT_THROW(describe_study(dir / "absent", out), InputError);
}

}  // namespace
}  // namespace kvaudit::records
