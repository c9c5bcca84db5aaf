// The content digests of schema version 4 (prompt_digest, kept_digest): their messages byte for
// byte, that one changed id or kept position changes them, that the full-KV shortcut equals the
// digest of the full selection, the refusal of malformed selections; and that a shard of schema
// version 3 (a committed fixture, written before the digests existed) still reads and verifies.
#include "suite/records/content_digests.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "suite/common/sha256.h"
#include "suite/records/record_digest.h"
#include "suite/records/shard_reader.h"
#include "tests/records/record_formula.h"
#include "tests/records/test_support.h"

namespace kvaudit::records {
namespace {

std::string bytes_of(std::initializer_list<unsigned> values) {
  std::string out;
  for (const unsigned v : values) out.push_back(static_cast<char>(v));
  return out;
}

TEST(ContentDigests, PromptMessageIsTheIdsInOrderAsLittleEndianI32) {
  const std::vector<std::int32_t> context{1, 258}, question{}, suffix{-1};
  EXPECT_EQ(prompt_digest_message(context, question, suffix),
            bytes_of({1, 0, 0, 0, 2, 1, 0, 0, 0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(prompt_digest(context, question, suffix),
            digest_prefix_u64(sha256(prompt_digest_message(context, question, suffix))));
}

TEST(ContentDigests, PromptDigestChangesWithOneId) {
  std::vector<std::int32_t> context{5, 6, 7}, question{8}, suffix{9, 10};
  const std::uint64_t before = prompt_digest(context, question, suffix);
  question[0] = 11;
  EXPECT_NE(prompt_digest(context, question, suffix), before);
}

TEST(ContentDigests, KeptMessageHasShapeCountsAndPositions) {
  const KeptPositions kept{{{0, 3}, {1}}};  // 1 layer, 2 KV heads
  EXPECT_EQ(kept_digest_message(kept),
            bytes_of({1, 0, 0, 0, 2, 0, 0, 0,              // layers, heads
                      2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0,  // head 0: 2 positions
                      1, 0, 0, 0, 1, 0, 0, 0}));           // head 1: 1 position
}

TEST(ContentDigests, OneChangedKeptPositionChangesTheDigest) {
  KeptPositions kept(3, std::vector<std::vector<std::int32_t>>(2));
  for (auto& layer : kept) {
    for (auto& head : layer) head = {0, 4, 9, 17, 30};
  }
  const std::uint64_t before = kept_digest(kept);
  kept[2][1][3] = 18;  // one position of one head of the last layer
  EXPECT_NE(kept_digest(kept), before);
  kept[2][1][3] = 17;
  EXPECT_EQ(kept_digest(kept), before);
  std::swap(kept[0][0], kept[0][1]);  // same positions, other head: equal here, so still equal
  EXPECT_EQ(kept_digest(kept), before);
  kept[1][0].pop_back();  // one fewer kept entry
  EXPECT_NE(kept_digest(kept), before);
}

TEST(ContentDigests, FullKvShortcutEqualsTheFullSelection) {
  for (const int boundary : {0, 1, 37}) {
    KeptPositions full(4, std::vector<std::vector<std::int32_t>>(3));
    for (auto& layer : full) {
      for (auto& head : layer) {
        for (int p = 0; p < boundary; ++p) head.push_back(p);
      }
    }
    EXPECT_EQ(full_kept_digest(4, 3, boundary), kept_digest(full)) << boundary;
  }
  EXPECT_NE(full_kept_digest(4, 3, 37), full_kept_digest(3, 4, 37));
  EXPECT_NE(full_kept_digest(4, 3, 37), full_kept_digest(4, 3, 36));
}

TEST(ContentDigests, MalformedSelectionsAreRefused) {
  EXPECT_THROW(kept_digest({{{1, 1}}}), std::invalid_argument);           // not strictly ascending
  EXPECT_THROW(kept_digest({{{-1, 2}}}), std::invalid_argument);          // negative
  EXPECT_THROW(kept_digest({{{1}}, {{1}, {2}}}), std::invalid_argument);  // ragged heads
  EXPECT_THROW(full_kept_digest(1, 1, -1), std::invalid_argument);
}

TEST(ContentDigests, RecordDigestCoversThemFromVersion4On) {
  CellRecord r = testing::formula_record(3, 0, 1);
  const std::uint64_t v4 = record_digest(r, 4);
  const std::uint64_t v3 = record_digest(r, 3);
  r.kept_digest ^= 1;
  EXPECT_NE(record_digest(r, 4), v4);
  EXPECT_EQ(record_digest(r, 3), v3);  // a version-3 record has no such member
  EXPECT_EQ(record_digest_message(r, 4).size(), record_digest_message(r, 3).size() + 16);
}

// tests/golden/records/README.md: a published shard written by the schema-3 build.
TEST(ContentDigests, ASchemaThreeShardStillReadsAndVerifies) {
  const std::filesystem::path fixture = std::filesystem::path(KVAUDIT_RECORDS_GOLDEN) / "schema3" /
                                        "part-local.0.t0.a1.pid4242.5c4e3a01-r0.s0.h5";
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "shards");
  for (const char* suffix : {"", ".sha256"}) {
    std::filesystem::copy_file(fixture.string() + suffix,
                               (dir.path() / "shards" / fixture.filename()).string() + suffix);
  }
  const StudyRecords study = read_study(dir.path() / "shards");
  ASSERT_EQ(study.published.size(), 1u);
  EXPECT_EQ(study.published[0].verification, ShardVerification::checksum);
  ASSERT_EQ(study.records.size(), 12u);
  for (std::size_t i = 0; i < study.records.size(); ++i) {
    const CellRecord& got = study.records[i];
    CellRecord want = testing::formula_record(2 + i, 0, 1);
    want.prompt_digest = 0;  // version 3: unknown
    want.kept_digest = 0;
    EXPECT_EQ(got.prompt_digest, 0u);
    EXPECT_EQ(got.kept_digest, 0u);
    EXPECT_EQ(got.output, want.output) << i;
    EXPECT_EQ(record_digest(got, 3), record_digest(want, 3)) << i;
  }
}

}  // namespace
}  // namespace kvaudit::records
