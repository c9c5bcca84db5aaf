// ThinK's cache edit on the CPU backend (methods/think.h): KvCache::zero_key_channels and
// SequenceState::zero_key_channels zero the pruned key channels (key panels included, so the
// attention kernels see them), count them as freed in kept_bytes(), and leave keys appended later
// whole.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "methods/method.h"
#include "runners/cpu/attention.h"
#include "runners/cpu/key_panels.h"
#include "runners/cpu/kv_cache.h"
#include "runners/cpu/sequence_state.h"

namespace kvaudit::cpu {
namespace {

// Key element (position p, head h, channel d) = 0.1·(p + 1) · (1 + h) + 0.01·d·(d − 2) (distinct,
// mixed-sign-free but channel-dependent); value = sin-like pattern so attention outputs differ.
float key_of(int p, int h, int d) {
  return 0.1f * static_cast<float>((p + 1) * (1 + h)) + 0.01f * static_cast<float>(d * (d - 2));
}
float value_of(int p, int h, int d) { return static_cast<float>((p * 7 + h * 3 + d) % 11) - 5.0f; }

// Appends `count` tokens to every layer; channels listed in `zeroed[h]` are written as 0.
void append_tokens(KvCache& cache, int count,
                   const std::vector<std::vector<std::int32_t>>& zeroed = {}) {
  const int heads = cache.num_kv_heads(), dim = cache.head_dim();
  std::vector<std::int32_t> positions;
  std::vector<float> keys, values;
  for (int t = 0; t < count; ++t) {
    const int p = cache.next_position() + t;
    positions.push_back(p);
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < dim; ++d) {
        bool zero = false;
        if (!zeroed.empty())
          for (const auto c : zeroed[static_cast<std::size_t>(h)]) zero = zero || c == d;
        keys.push_back(zero ? 0.0f : key_of(p, h, d));
        values.push_back(value_of(p, h, d));
      }
  }
  for (int layer = 0; layer < cache.num_layers(); ++layer)
    cache.append_layer(layer, positions, keys, values);
  cache.commit_step(count);
}

TEST(ThinkCache, ZeroesTheChannelsOfEveryHeldKeyAndKeepsThePanelsInStep) {
  KvCache cache(1, 2, 4, 2);
  append_tokens(cache, 5);
  const std::vector<std::int32_t> channels = {1, 3};
  cache.zero_key_channels(0, 0, channels);
  const KvHeadView h0 = cache.head(0, 0), h1 = cache.head(0, 1);
  for (int p = 0; p < 5; ++p)
    for (int d = 0; d < 4; ++d) {
      const auto i = static_cast<std::size_t>(p * 4 + d);
      EXPECT_EQ(h0.keys[i], (d == 1 || d == 3) ? 0.0f : key_of(p, 0, d)) << p << " " << d;
      EXPECT_EQ(h1.keys[i], key_of(p, 1, d));  // the other head is untouched
      EXPECT_EQ(h0.values[i], value_of(p, 0, d));
    }
  const auto panels = keys_to_panels(h0.keys.data(), h0.size(), 4);
  EXPECT_EQ(std::vector<float>(h0.key_panels.begin(), h0.key_panels.end()), panels);
  const auto listed = cache.zeroed_key_channels(0, 0);
  EXPECT_EQ(std::vector<std::int32_t>(listed.begin(), listed.end()), channels);
  EXPECT_TRUE(cache.zeroed_key_channels(0, 1).empty());
}

TEST(ThinkCache, KeptBytesCountThePrunedChannelsOfThePrunedEntriesAsFreed) {
  // 1 layer, 2 KV heads, head_dim 4, 2 bytes per element.
  KvCache cache(1, 2, 4, 2);
  append_tokens(cache, 5);
  EXPECT_EQ(cache.kept_bytes(), 10u * 2u * 4u * 2u);  // 160
  cache.zero_key_channels(0, 0, std::vector<std::int32_t>{1, 3});
  // (10 entries · 8 elements − 5 entries · 2 pruned channels) · 2 bytes = (80 − 10) · 2
  EXPECT_EQ(cache.kept_bytes(), 140u);
  // Two decoded tokens keep all channels: (14 · 8 − 10) · 2 = 204.
  append_tokens(cache, 2);
  EXPECT_EQ(cache.kept_bytes(), 204u);
  EXPECT_EQ(cache.head(0, 0).keys[5 * 4 + 1], key_of(5, 0, 1));  // not zeroed
  // Eviction after pruning: head 0 keeps {0 (pruned), 5 (whole)}, head 1 all 7:
  // (9 · 8 − 1 · 2) · 2 = 140.
  cache.retain(0, 0, std::vector<std::int32_t>{0, 5});
  EXPECT_EQ(cache.kept_bytes(), 140u);
  // Rewind to 3 tokens: head 0 {0}, head 1 {0, 1, 2}: (4 · 8 − 2) · 2 = 60; the token appended
  // next (position 3) keeps all channels: (6 · 8 − 2) · 2 = 92.
  cache.truncate(3);
  EXPECT_EQ(cache.kept_bytes(), 60u);
  append_tokens(cache, 1);
  EXPECT_EQ(cache.kept_bytes(), 92u);
}

TEST(ThinkCache, RefusesBadChannelListsAndASecondPruning) {
  KvCache cache(1, 1, 4, 4);
  append_tokens(cache, 3);
  EXPECT_THROW(cache.zero_key_channels(0, 0, std::vector<std::int32_t>{2, 1}),
               std::invalid_argument);
  EXPECT_THROW(cache.zero_key_channels(0, 0, std::vector<std::int32_t>{1, 1}),
               std::invalid_argument);
  EXPECT_THROW(cache.zero_key_channels(0, 0, std::vector<std::int32_t>{4}), std::invalid_argument);
  EXPECT_THROW(cache.zero_key_channels(0, 0, std::vector<std::int32_t>{-1}), std::invalid_argument);
  EXPECT_EQ(cache.head(0, 0).keys[1], key_of(0, 0, 1));  // nothing changed
  cache.zero_key_channels(0, 0, std::vector<std::int32_t>{0});
  EXPECT_THROW(cache.zero_key_channels(0, 0, std::vector<std::int32_t>{1}), std::invalid_argument);
}

TEST(ThinkCache, AttentionOverThePrunedCacheEqualsAttentionOverZeroedKeys) {
  // 4 query heads over 2 KV heads, head_dim 8, 9 tokens; head 0 prunes {0, 2, 5}, head 1 {7}.
  const std::vector<std::vector<std::int32_t>> zeroed = {{0, 2, 5}, {7}};
  for (const bool bf16 : {false, true}) {
    KvCache pruned(1, 2, 8, 4), built_zeroed(1, 2, 8, 4);
    append_tokens(pruned, 9);
    append_tokens(built_zeroed, 9, zeroed);
    for (int h = 0; h < 2; ++h) pruned.zero_key_channels(0, h, zeroed[static_cast<std::size_t>(h)]);
    // One decode query row at position 9 (it sees every entry).
    std::vector<float> queries(4 * 8);
    for (std::size_t i = 0; i < queries.size(); ++i)
      queries[i] = 0.3f * static_cast<float>(static_cast<int>(i % 7) - 3);
    const std::vector<std::int32_t> query_positions = {9};
    const auto run = [&](const KvCache& cache, bool eager) {
      const std::vector<KvHeadView> views = {cache.head(0, 0), cache.head(0, 1)};
      AttentionProblem p{
          4, 2, 8, 0.35f, bf16 ? Rounding::bf16 : Rounding::none, queries, query_positions, views};
      std::vector<float> out(queries.size());
      if (eager)
        attention_eager(p, 1, out);
      else
        attention_sdpa(p, 4, out);
      return out;
    };
    for (const bool eager : {true, false}) {
      const auto got = run(pruned, eager);
      EXPECT_EQ(got, run(built_zeroed, eager)) << "eager " << eager << " bf16 " << bf16;
      // and the pruning changed the result (the test can fail)
      KvCache whole(1, 2, 8, 4);
      append_tokens(whole, 9);
      EXPECT_NE(got, run(whole, eager));
    }
  }
}

TEST(ThinkCache, SequenceStateChecksTheWholeListBeforeAnyChange) {
  KvCache cache(2, 2, 4, 2);
  append_tokens(cache, 4);
  SequenceState state(cache);
  methods::Selection selection;
  selection.zeroed_key_channels = {{{1}, {}}, {{0, 3}, {2, 2}}};  // layer 1 head 1: not ascending
  EXPECT_THROW(state.zero_key_channels(selection), std::invalid_argument);
  EXPECT_EQ(state.kv_cache().head(0, 0).keys[1], key_of(0, 0, 1));  // layer 0 untouched
  selection.zeroed_key_channels = {{{1}, {}}};                      // one layer missing
  EXPECT_THROW(state.zero_key_channels(selection), std::invalid_argument);
  selection.zeroed_key_channels = {{{1}, {}}, {{0, 3}, {2}}};
  state.zero_key_channels(selection);
  EXPECT_EQ(state.kv_cache().head(1, 0).keys[3], 0.0f);
  EXPECT_EQ(state.kv_cache().head(1, 1).keys[2], 0.0f);
  EXPECT_EQ(state.kv_cache().head(0, 1).keys[2], key_of(0, 1, 2));
  // 16 entries · 8 elements − 4 entries · (1 + 0 + 2 + 1) pruned channels, 2 bytes each
  EXPECT_EQ(state.kept_bytes(), (16u * 8u - 4u * 4u) * 2u);
  EXPECT_THROW(state.zero_key_channels(selection), std::invalid_argument);  // pruned already
}

}  // namespace
}  // namespace kvaudit::cpu
