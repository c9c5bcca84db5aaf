// CAM cache merging (runners/unit/cam_merging.h, kvpress CAMPress) by hand on toy inputs: the
// step attention averaged per KV group, the zero-padded running sums, the shared selection with
// the candidates' tie-break (later position first), the merge windows cut at the kept list's end,
// P = clamp(A_p / mean_window A, 0, 1) with its NaN / inf rules, the scatter of v_p / b into the
// window, bf16 rounding points, and the Philox draws; then the per-layer trigger of
// DecodingCompressor on a tiny model (counting on while the cache is not above the target).
// Parity with kvpress itself: tests/methods/kvpress_cam_parity_test.cpp.
#include "runners/unit/cam_merging.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "methods/bf16_rounding.h"
#include "methods/knorm.h"
#include "methods/merging.h"
#include "methods/scorer_method.h"
#include "runners/cpu/cpu_model.h"
#include "runners/unit/decoding_compression.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

TEST(CamMerging, StepAttentionIsTheSoftmaxRowAveragedOverEachKvGroup) {
  // 2 query heads sharing 1 KV head, d = 4, 3 cached keys.
  const std::vector<float> keys = {1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0};
  const std::vector<float> values(12, 0.0f);
  const std::vector<std::int32_t> positions = {0, 1, 2};
  const CacheHeadEntries head{positions, keys, values};
  const std::vector<float> q = {2, 0, 0, 0, 0, -2, 0, 0};  // [H = 2, d = 4]
  const auto row = cam_step_attention(q, std::span<const CacheHeadEntries>(&head, 1), 2, 4, false);
  ASSERT_EQ(row.size(), 3u);
  // Head 0 scores q·k / √4 = (1, 0, 1); head 1: (0, −1, −1).
  const double e = std::exp(1.0);
  const double h0[3] = {e / (2 * e + 1), 1 / (2 * e + 1), e / (2 * e + 1)};
  const double z1 = 1 + 2 / e;
  const double h1[3] = {1 / z1, (1 / e) / z1, (1 / e) / z1};
  for (int j = 0; j < 3; ++j)
    EXPECT_NEAR(row[static_cast<std::size_t>(j)], (h0[j] + h1[j]) / 2, 1e-6);
}

TEST(CamMerging, RunningSumsAreZeroPaddedAsTheCacheGrows) {
  std::vector<float> sums;
  const std::vector<float> first = {0.5f, 0.25f, 0.25f, 1.0f};  // 2 heads × 2 entries
  cam_accumulate(sums, first, 2, false);
  EXPECT_EQ(sums, first);
  const std::vector<float> step = {0.25f, 0.25f, 0.5f, 0.5f, 0.25f, 0.25f};  // 2 heads × 3
  cam_accumulate(sums, step, 2, false);
  EXPECT_EQ(sums, (std::vector<float>{0.75f, 0.5f, 0.5f, 0.75f, 1.25f, 0.25f}));
  // bf16: the sum is rounded (1 + 2⁻⁹ is not a bf16 value).
  std::vector<float> b = {1.0f};
  cam_accumulate(b, std::vector<float>{0x1p-9f}, 1, true);
  EXPECT_EQ(b[0], 1.0f);
}

// n = 8, one KV head, d = 2, target 4, merge_budget 2, c = 2 steps since the last compression.
//   m = [9, 2, 8, 1, 7, 1, 6, 0.5]: K = {0, 2, 4, 6}, E = {1, 3, 5, 7}.
//   Candidates: the 2 highest m in E: 1 (m 2), then 3 and 5 tie at 1 → the later, 5.
//   Windows: 1 → K after it = {2, 4} (b 2); 5 → {6} (cut at K's end, b 1).
//   A = [.1, .375, .25, .05, .75, .5, .25, .01]:
//     P(1) = .375 / ((.25 + .75) / 2) = .75;  P(5) = .5 / .25 = 2 → 1.
CamMergeInput toy(std::vector<float>& m, std::vector<float>& a, std::vector<float>& v) {
  m = {9, 2, 8, 1, 7, 1, 6, 0.5f};
  a = {0.1f, 0.375f, 0.25f, 0.05f, 0.75f, 0.5f, 0.25f, 0.01f};
  v = {0, 0, 10, 20, 1, 1, 0, 0, 2, 2, 30, 40, 3, 3, 0, 0};  // v_j = row j
  CamMergeInput in;
  in.mean_scores = m;
  in.attention_sums = a;
  in.values = {v};
  in.length = 8;
  in.head_dim = 2;
  in.target_size = 4;
  in.merge_budget = 2;
  in.steps_since = 2;
  return in;
}

TEST(CamMerging, HandComputedSelectionWindowsProbabilitiesAndScatter) {
  std::vector<float> m, a, v;
  const CamMergeInput in = toy(m, a, v);
  std::vector<float> seen;
  const CamMergeResult r = cam_merge(in, [&](float p, int h, int c) {
    EXPECT_EQ(h, 0);
    EXPECT_EQ(c, static_cast<int>(seen.size()));
    seen.push_back(p);
    return true;
  });
  EXPECT_EQ(r.kept, (std::vector<std::int32_t>{0, 2, 4, 6}));
  EXPECT_EQ(r.candidates, (std::vector<std::int32_t>{1, 5}));  // 5, not 3: later wins the tie
  EXPECT_EQ(r.window_start, (std::vector<int>{1, 3}));
  EXPECT_EQ(r.window_size, (std::vector<int>{2, 1}));
  EXPECT_EQ(seen, (std::vector<float>{0.75f, 1.0f}));
  EXPECT_EQ(r.merges, 2);
  // v2 += v1/2, v4 += v1/2, v6 += v5/1; v0 untouched (not replaced).
  ASSERT_EQ(r.replacements.size(), 3u);
  EXPECT_EQ(r.replacements[0].index, 2);
  EXPECT_EQ(r.replacements[0].value, (std::vector<float>{1 + 5, 1 + 10}));
  EXPECT_EQ(r.replacements[1].index, 4);
  EXPECT_EQ(r.replacements[1].value, (std::vector<float>{2 + 5, 2 + 10}));
  EXPECT_EQ(r.replacements[2].index, 6);
  EXPECT_EQ(r.replacements[2].value, (std::vector<float>{3 + 30, 3 + 40}));
}

TEST(CamMerging, FailedDrawsMergeNothingAndOverlappingWindowsAdd) {
  std::vector<float> m, a, v;
  CamMergeInput in = toy(m, a, v);
  // Only P = 1 passes: candidate 5 merges, candidate 1 does not.
  const CamMergeResult one = cam_merge(in, [](float p, int, int) { return p >= 0.8f; });
  EXPECT_EQ(one.merges, 1);
  ASSERT_EQ(one.replacements.size(), 1u);
  EXPECT_EQ(one.replacements[0].index, 6);
  // Budget 4: both windows reach 6 (1 → {2, 4, 6}, 5 → {6}); 6 receives v1/3 and v5.
  in.merge_budget = 4;
  const CamMergeResult both = cam_merge(in, [](float, int, int) { return true; });
  EXPECT_EQ(both.window_size, (std::vector<int>{3, 1}));
  ASSERT_EQ(both.replacements.size(), 3u);
  const float third = 1.0f / 3.0f;
  EXPECT_EQ(both.replacements[2].value,
            (std::vector<float>{3 + 10 * third + 30, 3 + 20 * third + 40}));
}

TEST(CamMerging, ZeroWindowAttentionGivesOneAndZeroOverZeroGivesZero) {
  std::vector<float> m, a, v;
  CamMergeInput in = toy(m, a, v);
  a[2] = a[4] = 0.0f;  // candidate 1's window has no attention: .375 / 0 = inf → 1
  a[5] = 0.0f;
  a[6] = 0.0f;  // candidate 5: 0 / 0 = NaN → 0
  std::vector<float> seen;
  (void)cam_merge(in, [&](float p, int, int) {
    seen.push_back(p);
    return false;
  });
  EXPECT_EQ(seen, (std::vector<float>{1.0f, 0.0f}));
}

TEST(CamMerging, Bf16RoundsTheScaleAndEachContribution) {
  std::vector<float> m, a, v;
  CamMergeInput in = toy(m, a, v);
  in.merge_budget = 3;  // candidate 1's window {2, 4, 6}: scale bf16(1/3) = 0.333984375
  in.bf16 = true;
  v[2] = 3.0f;  // v1 = (3, 20)
  const CamMergeResult r = cam_merge(in, [](float, int, int c) { return c == 0; });
  ASSERT_FALSE(r.replacements.empty());
  const float c0 = methods::round_to_bf16(3.0f * 0.333984375f);  // 1.00195… → 1.0
  EXPECT_EQ(r.replacements[0].index, 2);
  EXPECT_EQ(r.replacements[0].value[0], methods::round_to_bf16(1.0f + c0));
}

TEST(CamMerging, PhiloxDrawsAreDeterministicPerCellLayerAndEvent) {
  const float u = cam_uniform(7, 11, 0, 4, 0);
  EXPECT_EQ(u, cam_uniform(7, 11, 0, 4, 0));
  EXPECT_GE(u, 0.0f);
  EXPECT_LT(u, 1.0f);
  std::set<float> distinct = {u,
                              cam_uniform(7, 11, 1, 4, 0),
                              cam_uniform(7, 11, 0, 8, 0),
                              cam_uniform(7, 12, 0, 4, 0),
                              cam_uniform(8, 11, 0, 4, 0),
                              cam_uniform(7, 11, 0, 4, 1),
                              cam_uniform(7, 11, 0, 4, 4)};
  EXPECT_EQ(distinct.size(), 7u);
  double mean = 0.0;
  for (int e = 0; e < 4000; ++e) mean += cam_uniform(1, 2, 3, 5, e);
  EXPECT_NEAR(mean / 4000, 0.5, 0.02);
  EXPECT_THROW(cam_uniform(1, 2, 0, 1, std::int64_t{1} << 18), std::invalid_argument);
}

// The trigger on a tiny model: target 44 with a 40-token prompt and interval 4. At step 4 the
// cache holds 44 entries (not above the target): no compression, the count goes on; step 5
// compresses 45 → 44 with c = 5 candidates wanted but only n_evict = 1 evicted; then every 4
// steps (48 → 44).
TEST(CamMerging, CompressorKeepsCountingWhileTheCacheIsNotAboveTheTarget) {
  const model::ModelWeights weights = testing::load_tiny_model("llama", "f32");
  cpu::CpuModel engine(weights, AttentionBackend::sdpa);
  const auto ids = testing::random_tokens(40, weights.config.vocab_size, 5);
  auto cache = engine.new_cache(0);
  const LogitMatrix logits = engine.prefill(*cache, ids, LogitRows::last);
  const methods::ScorerMethod knorm(std::make_shared<methods::KnormScorer>());
  int draws = 0;
  CompressingSequence s{.cache = cache.get(),
                        .last_logits = logits.row(0),
                        .method = &knorm,
                        .policy = {.compression_interval = 4,
                                   .target_size = 44,
                                   .hidden_states_buffer_size = 256,
                                   .merge_budget = 2},
                        .context = {},
                        .merge_draw = [&](float) {
                          ++draws;
                          return true;
                        }};
  const auto out = generate_greedy_compressing(engine, std::span<const CompressingSequence>(&s, 1),
                                               {.max_new_tokens = 14, .eos_token_ids = {}}, true);
  const auto& events = out.front().events;
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].decode_step, 5);
  EXPECT_EQ(events[1].decode_step, 9);
  EXPECT_EQ(events[2].decode_step, 13);
  // 2 layers × 2 KV heads draw once per candidate: 1 candidate at step 5, 4 at steps 9 and 13.
  EXPECT_EQ(draws, 4 * (1 + 4 + 4));
  for (const auto& e : events) {
    EXPECT_TRUE(e.evicted);
    for (const auto& layer : e.kept)
      for (const auto& head : layer) EXPECT_EQ(head.size(), 44u);
    EXPECT_EQ(e.kept.front().front(), e.kept.front().back());  // one selection for all heads
  }
  // CAM's base press must be a plain scorer method.
  const methods::MergingMethod merging(std::make_shared<methods::KnormScorer>(), {});
  EXPECT_THROW(DecodingCompressor(engine, merging, {.merge_budget = 2}, {}, false),
               std::invalid_argument);
  EXPECT_THROW(DecodingCompressor(engine, knorm, {.merge_budget = -1}, {}, false),
               std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::unit
