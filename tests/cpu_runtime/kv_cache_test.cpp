// Tests of the ragged per-head KV cache: append/commit bookkeeping, original-length positions after
// eviction, retain's compaction and validation, truncate, rollback of an uncommitted step, kept
// bytes.
#include "runners/cpu/kv_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "runners/cpu/key_panels.h"

namespace kvaudit::cpu {
namespace {

// Appends T tokens to every layer: key element (t, h, d) = 1000·position + 10·h + d, value = −key.
void append_tokens(KvCache& cache, int count) {
  const int heads = cache.num_kv_heads(), dim = cache.head_dim();
  std::vector<std::int32_t> positions;
  std::vector<float> keys, values;
  for (int t = 0; t < count; ++t) {
    const int position = cache.next_position() + t;
    positions.push_back(position);
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < dim; ++d) {
        keys.push_back(static_cast<float>(1000 * position + 10 * h + d));
        values.push_back(-keys.back());
      }
  }
  for (int layer = 0; layer < cache.num_layers(); ++layer)
    cache.append_layer(layer, positions, keys, values);
  cache.commit_step(count);
}

TEST(KvCacheTest, AppendsPerHeadAndCountsOriginalLength) {
  KvCache cache(2, 3, 4, 2);
  append_tokens(cache, 5);
  EXPECT_EQ(cache.original_length(), 5);
  EXPECT_EQ(cache.next_position(), 5);
  const KvHeadView head = cache.head(1, 2);
  ASSERT_EQ(head.size(), 5u);
  EXPECT_EQ(head.positions[3], 3);
  EXPECT_EQ(head.keys[3 * 4 + 1], 1000 * 3 + 20 + 1);
  EXPECT_EQ(head.values[3 * 4 + 1], -(1000 * 3 + 20 + 1));
  EXPECT_EQ(cache.kept_entries(), 2u * 3u * 5u);
  EXPECT_EQ(cache.kept_bytes(), 2u * 3u * 5u * 2u * 4u * 2u);
}

TEST(KvCacheTest, RetainCompactsEachHeadOnItsOwnAndPositionsContinueAtTheOriginalLength) {
  KvCache cache(1, 2, 2, 4);
  append_tokens(cache, 6);
  const std::vector<std::int32_t> keep0 = {0, 4, 5};
  const std::vector<std::int32_t> keep1 = {2};
  cache.retain(0, 0, keep0);
  cache.retain(0, 1, keep1);
  EXPECT_EQ(cache.kept_count(0, 0), 3u);
  EXPECT_EQ(cache.kept_count(0, 1), 1u);
  const KvHeadView h0 = cache.head(0, 0);
  EXPECT_EQ(std::vector<std::int32_t>(h0.positions.begin(), h0.positions.end()), keep0);
  EXPECT_EQ(h0.keys[2], 4000.0f);  // entry 1 is position 4, kv head 0, d 0
  EXPECT_EQ(h0.values[5], -5001.0f);
  EXPECT_EQ(cache.head(0, 1).keys[1], 2011.0f);
  EXPECT_EQ(cache.kept_bytes(), 4u * 2u * 2u * 4u);
  // New tokens continue at the original length (6), not at the kept count.
  EXPECT_EQ(cache.next_position(), 6);
  append_tokens(cache, 2);
  const KvHeadView after = cache.head(0, 1);
  EXPECT_EQ(std::vector<std::int32_t>(after.positions.begin(), after.positions.end()),
            (std::vector<std::int32_t>{2, 6, 7}));
  EXPECT_EQ(after.keys[2], 6010.0f);
}

TEST(KvCacheTest, RetainRejectsBadRequestsWithoutChangingTheHead) {
  KvCache cache(1, 1, 2, 2);
  append_tokens(cache, 4);
  const std::vector<std::int32_t> unsorted = {2, 1};
  const std::vector<std::int32_t> duplicate = {1, 1};
  const std::vector<std::int32_t> missing = {1, 9};
  EXPECT_THROW(cache.retain(0, 0, unsorted), std::invalid_argument);
  EXPECT_THROW(cache.retain(0, 0, duplicate), std::invalid_argument);
  try {
    cache.retain(0, 0, missing);
    FAIL() << "expected an exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("position 9 is not held"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cache.retain(1, 0, missing), std::out_of_range);
  EXPECT_EQ(cache.kept_count(0, 0), 4u);
  // Retaining everything keeps everything; retaining nothing empties the head.
  const std::vector<std::int32_t> all = {0, 1, 2, 3};
  cache.retain(0, 0, all);
  EXPECT_EQ(cache.kept_count(0, 0), 4u);
  cache.retain(0, 0, {});
  EXPECT_EQ(cache.kept_count(0, 0), 0u);
  EXPECT_EQ(cache.original_length(), 4);
}

TEST(KvCacheTest, AppendChecksPositionsAndDiscardUncommittedRollsBack) {
  KvCache cache(2, 1, 2, 2);
  append_tokens(cache, 3);
  const std::vector<std::int32_t> wrong = {4};
  const std::vector<float> kv = {1, 2};
  EXPECT_THROW(cache.append_layer(0, wrong, kv, kv), std::invalid_argument);
  const std::vector<std::int32_t> right = {3};
  cache.append_layer(0, right, kv, kv);
  EXPECT_THROW(cache.append_layer(0, right, kv, kv), std::logic_error);  // same layer twice
  EXPECT_THROW(cache.commit_step(1), std::logic_error);                  // layer 1 missing
  EXPECT_THROW(cache.retain(0, 0, std::vector<std::int32_t>{0}), std::logic_error);
  cache.discard_uncommitted();
  EXPECT_EQ(cache.kept_count(0, 0), 3u);
  EXPECT_EQ(cache.original_length(), 3);
  append_tokens(cache, 1);  // the cache works normally again
  EXPECT_EQ(cache.kept_count(1, 0), 4u);
}

// KvCache::truncate: dropping every entry at or after a position (also from heads already
// compacted by retain), resetting original_length, key panels in step, errors.
std::vector<std::int32_t> positions_of(const KvCache& cache, int layer, int kv_head) {
  const KvHeadView head = cache.head(layer, kv_head);
  return {head.positions.begin(), head.positions.end()};
}

TEST(KvCacheTruncateTest, DropsEntriesAtOrAfterTheLengthAndRewindsPositions) {
  KvCache cache(2, 2, 3, 4);
  append_tokens(cache, 40);
  const std::vector<std::int32_t> sparse = {1, 5, 33, 38};
  cache.retain(1, 0, sparse);
  cache.truncate(34);
  EXPECT_EQ(cache.original_length(), 34);
  EXPECT_EQ(cache.next_position(), 34);
  EXPECT_EQ(cache.kept_count(0, 0), 34u);
  EXPECT_EQ(positions_of(cache, 1, 0), (std::vector<std::int32_t>{1, 5, 33}));
  EXPECT_EQ(cache.kept_entries(), 34u * 3u + 3u);
  EXPECT_EQ(cache.kept_bytes(), cache.kept_entries() * 2u * 3u * 4u);
  // Keys, values and panels of what is left are untouched.
  const KvHeadView head = cache.head(0, 1);
  ASSERT_EQ(head.keys.size(), 34u * 3u);
  EXPECT_EQ(head.keys[33 * 3 + 2], 1000.0f * 33 + 10 + 2);
  EXPECT_EQ(head.values[33 * 3 + 2], -(1000.0f * 33 + 10 + 2));
  ASSERT_EQ(head.key_panels.size(), key_panel_floats(34, 3));
  // Entry 33 lives in panel 1, lane 1; lanes 2.. of that panel are zero again.
  EXPECT_EQ(head.key_panels[1 * 3 * kKeyPanel + 2 * kKeyPanel + 1], 1000.0f * 33 + 10 + 2);
  EXPECT_EQ(head.key_panels[1 * 3 * kKeyPanel + 2 * kKeyPanel + 2], 0.0f);
  // Appending continues at the truncated length.
  append_tokens(cache, 2);
  EXPECT_EQ(cache.original_length(), 36);
  EXPECT_EQ(positions_of(cache, 1, 0), (std::vector<std::int32_t>{1, 5, 33, 34, 35}));
  EXPECT_EQ(cache.head(1, 0).keys[3 * 3], 1000.0f * 34);
}

TEST(KvCacheTruncateTest, EqualsACacheThatNeverHeldTheDroppedTokens) {
  KvCache longer(1, 2, 4, 2), shorter(1, 2, 4, 2);
  append_tokens(longer, 50);
  append_tokens(shorter, 17);
  longer.truncate(17);
  for (int h = 0; h < 2; ++h) {
    const KvHeadView a = longer.head(0, h), b = shorter.head(0, h);
    EXPECT_EQ(std::vector<float>(a.keys.begin(), a.keys.end()),
              std::vector<float>(b.keys.begin(), b.keys.end()));
    EXPECT_EQ(std::vector<float>(a.values.begin(), a.values.end()),
              std::vector<float>(b.values.begin(), b.values.end()));
    EXPECT_EQ(std::vector<float>(a.key_panels.begin(), a.key_panels.end()),
              std::vector<float>(b.key_panels.begin(), b.key_panels.end()));
  }
  // Truncating to the current length or to zero is allowed.
  longer.truncate(17);
  EXPECT_EQ(longer.kept_entries(), 2u * 17u);
  longer.truncate(0);
  EXPECT_EQ(longer.kept_entries(), 0u);
  EXPECT_EQ(longer.original_length(), 0);
}

TEST(KvCacheTruncateTest, RejectsBadLengthsAndAnOpenStep) {
  KvCache cache(2, 1, 2, 4);
  append_tokens(cache, 5);
  EXPECT_THROW(cache.truncate(6), std::invalid_argument);
  EXPECT_THROW(cache.truncate(-1), std::invalid_argument);
  const std::vector<std::int32_t> position = {5};
  const std::vector<float> row = {1.0f, 2.0f};
  cache.append_layer(0, position, row, row);
  EXPECT_THROW(cache.truncate(3), std::logic_error);
  cache.discard_uncommitted();
  EXPECT_EQ(cache.original_length(), 5);
  EXPECT_EQ(cache.kept_count(1, 0), 5u);
}

}  // namespace
}  // namespace kvaudit::cpu
