// KVCompose (methods/kvcompose.h): the repeated-context pass's chunk, the aggregated attention of
// a pass on hand-computed inputs (causality among the pass's rows, agg_task, agg_group, bf16
// rounding), the score enhancements (value norm, mean over heads), the per-layer / per-head counts
// on a 2-layer toy (composite tokens, the first layer's maximum, the lower bound, budget 1), the
// kept sets, and the factory/catalogue wiring.
#include "methods/kvcompose.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/bf16_rounding.h"
#include "methods/catalog.h"
#include "methods/method_factory.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

using Kept = std::vector<std::vector<std::int32_t>>;
using testing::OwnedLayer;

KvcomposeParams params(bool structured = true,
                       KvcomposeAggregation agg_task = KvcomposeAggregation::max,
                       KvcomposeAggregation agg_group = KvcomposeAggregation::mean) {
  KvcomposeParams p;
  p.structured = structured;
  p.agg_task = agg_task;
  p.agg_group = agg_group;
  return p;
}

TEST(Kvcompose, ThePassIsOneChunkRepeatingTheCachedTokens) {
  const KvcomposeMethod m(params());
  const std::vector<std::int32_t> cached = {10, 11, 12};
  const auto chunks = m.chunks(cached, PassPrompt{});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].tokens, cached);
  EXPECT_EQ(chunks[0].first, 0);
  EXPECT_EQ(chunks[0].end, 3);
  EXPECT_TRUE(m.chunks({}, PassPrompt{}).empty());
}

// One layer, H = 2 query heads sharing Hkv = 1 KV head, d = 1 (so q·k·d^-1/2 = q·k), b = 3.
// Cached keys k = (0, ln 2, ln 3) → exp(q·k) for q = 1: 1, 2, 3.
OwnedLayer tiny_layer(bool bf16 = false) {
  OwnedLayer o = testing::zero_layer(1, 2, 3, 1);
  o.bf16 = bf16;
  o.keys[0] = {0.0f, std::log(2.0f), std::log(3.0f)};
  return o;
}

// The pass's two rows: head 0 q = (1, 0), head 1 q = (0, 0) (token-major [T, H, 1]); own keys
// row 0 → 0, row 1 → ln 100 (row 0 must not see row 1: with it its weights would shrink 100-fold).
struct PassRows {
  std::vector<float> queries{1.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> keys{0.0f, std::log(100.0f)};
  std::vector<float> values{0.0f, 0.0f};
  PassLayerView view() const {
    PassLayerView v;
    v.layer = 0;
    v.num_tokens = 2;
    v.queries = queries;
    v.keys = keys;
    v.values = values;
    return v;
  }
};

// The attention of the pass's rows on the cached positions j = 0, 1, 2:
//   head 0 row 0 (q = 1):  exp (1, 2, 3 | own 1) / 7      → 1/7, 2/7, 3/7
//   head 0 row 1 (q = 0):  5 columns (3 cached + 2 own)   → 1/5 each
//   head 1 row 0 (q = 0):  4 columns                      → 1/4 each
//   head 1 row 1 (q = 0):                                 → 1/5 each
TEST(Kvcompose, TaskMaxGroupMeanOfTheRepeatedRowsAttention) {
  const OwnedLayer o = tiny_layer();
  const KvcomposeMethod m(params());
  ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
  const PassRows rows;
  m.observe(o.view(), PassChunk{{}, 0, 3}, rows.view(), r);
  // max over rows: head 0 (1/5, 2/7, 3/7), head 1 (1/4, 1/4, 1/4); mean over the two heads:
  //   (1/5 + 1/4)/2 = 9/40, (2/7 + 1/4)/2 = 15/56, (3/7 + 1/4)/2 = 19/56.
  EXPECT_NEAR(r.at(0, 0, 0), 9.0f / 40.0f, 1e-6f);
  EXPECT_NEAR(r.at(0, 0, 1), 15.0f / 56.0f, 1e-6f);
  EXPECT_NEAR(r.at(0, 0, 2), 19.0f / 56.0f, 1e-6f);
}

TEST(Kvcompose, TaskMeanGroupMax) {
  const OwnedLayer o = tiny_layer();
  const KvcomposeMethod m(params(true, KvcomposeAggregation::mean, KvcomposeAggregation::max));
  ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
  const PassRows rows;
  m.observe(o.view(), PassChunk{{}, 0, 3}, rows.view(), r);
  // mean over rows: head 0 ((1/7 + 1/5)/2, (2/7 + 1/5)/2, (3/7 + 1/5)/2) = (6/35, 17/70, 11/35);
  // head 1 (1/4 + 1/5)/2 = 9/40 = 0.225 each; max over heads: (0.225, 17/70, 11/35).
  EXPECT_NEAR(r.at(0, 0, 0), 0.225f, 1e-6f);
  EXPECT_NEAR(r.at(0, 0, 1), 17.0f / 70.0f, 1e-6f);
  EXPECT_NEAR(r.at(0, 0, 2), 11.0f / 35.0f, 1e-6f);
}

TEST(Kvcompose, Bf16RoundsTheAttentionWeightsAndTheRowSums) {
  // bf16-exact cached keys (0, 0.5, 1) so that q·k needs no rounding: head 0 row 0 (q = 1) has
  // logits (0, 0.5, 1 | own 0) → weights e^(l−1)/S with S = 2e^-1 + e^-0.5 + 1 ≈ 2.3423, each
  // rounded to bf16; the other rows are as above (1/5, 1/4, 1/5).
  OwnedLayer o = tiny_layer(true);
  o.keys[0] = {0.0f, 0.5f, 1.0f};
  const double sum = 2.0 * std::exp(-1.0) + std::exp(-0.5) + 1.0;
  const float w1 = round_to_bf16(static_cast<float>(std::exp(-0.5) / sum));  // ≈ 0.2589
  const float w2 = round_to_bf16(static_cast<float>(1.0 / sum));             // ≈ 0.4269
  const PassRows rows;
  {
    // max over rows and heads: position 1 max(w1, 1/5, 1/4, 1/5) = w1, position 2 w2.
    const KvcomposeMethod m(params(true, KvcomposeAggregation::max, KvcomposeAggregation::max));
    ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
    m.observe(o.view(), PassChunk{{}, 0, 3}, rows.view(), r);
    EXPECT_EQ(r.at(0, 0, 1), w1);
    EXPECT_NE(w1, static_cast<float>(std::exp(-0.5) / sum));  // the rounding is visible
    EXPECT_EQ(r.at(0, 0, 2), w2);
  }
  {
    // mean over rows: head 0 position 2 = bf16(w2 + bf16(1/5)) / bf16(2) ≈ 0.31 (the bf16 tensor's
    // sum is rounded), above head 1's (1/4 + 1/5)/2 ≈ 0.23; max over the heads.
    const KvcomposeMethod m(params(true, KvcomposeAggregation::mean, KvcomposeAggregation::max));
    ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
    m.observe(o.view(), PassChunk{{}, 0, 3}, rows.view(), r);
    EXPECT_EQ(r.at(0, 0, 2), round_to_bf16(w2 + round_to_bf16(0.2f)) / 2.0f);
  }
}

TEST(Kvcompose, PassKeyHasTheAggregationsThePassFoldsIn) {
  const KvcomposeMethod a(params());
  KvcomposeParams selection_only = params(false);
  selection_only.agg_head = KvcomposeAggregation::max;
  selection_only.add_v_norm = true;
  selection_only.keep_token_lower_bound = 5;
  EXPECT_EQ(a.pass_key(), KvcomposeMethod(selection_only).pass_key());
  EXPECT_NE(a.pass_key(), KvcomposeMethod(params(true, KvcomposeAggregation::mean)).pass_key());
  EXPECT_NE(a.pass_key(),
            KvcomposeMethod(params(true, KvcomposeAggregation::max, KvcomposeAggregation::max))
                .pass_key());
}

// Token scores s_g(j) of one layer, Hkv = 2, b = 2, d = 2: s_0 = (1, 2), s_1 = (3, 0); values
// head 0 (3, 4), (0, 1) → norms 5, 1; head 1 (1, 0), (0, 2) → norms 1, 2.
TEST(Kvcompose, ValueNormAndMeanAcrossHeads) {
  OwnedLayer o = testing::zero_layer(2, 2, 2, 2);
  o.values[0] = {3, 4, 0, 1};
  o.values[1] = {1, 0, 0, 2};
  const std::vector<LayerCapture> layers = {o.view()};
  ExtraPassResult pass = testing::empty_pass_result(1, 2, 2);
  pass.scores = {1, 2, 3, 0};
  KvcomposeParams p;  // add_mean_across_heads only (the default)
  // mean over heads (2, 1): s_0 = (3, 3), s_1 = (5, 1).
  EXPECT_EQ(KvcomposeMethod(p).token_scores(pass, layers), (std::vector<float>{3, 3, 5, 1}));
  // × ‖v‖ first: s_0 = (5, 2), s_1 = (3, 0); mean (4, 1): s_0 = (9, 3), s_1 = (7, 1).
  p.add_v_norm = true;
  EXPECT_EQ(KvcomposeMethod(p).token_scores(pass, layers), (std::vector<float>{9, 3, 7, 1}));
  p.add_mean_across_heads = false;
  EXPECT_EQ(KvcomposeMethod(p).token_scores(pass, layers), (std::vector<float>{5, 2, 3, 0}));
}

// The 2-layer toy, Hkv = 2, b = 4 (token scores as select() sees them):
//   layer 0 head 0 (0.50, 0.03, 0.02, 0.01)   head 1 (0.01, 0.02, 0.50, 0.03)
//   layer 1 head 0 (0.64, 0.58, 0.54, 0.52)   head 1 (0.52, 0.54, 0.58, 0.64)
// Each layer's heads have the same sorted scores, so the mean composite C_ℓ(r) is that sorted
// list: C_0 = (0.50, 0.03, 0.02, 0.01), C_1 = (0.64, 0.58, 0.54, 0.52); then C_0 ← max(C_0, C_1)
// = C_1.
const std::vector<float> kToy = {0.50f, 0.03f, 0.02f, 0.01f, 0.01f, 0.02f, 0.50f, 0.03f,
                                 0.64f, 0.58f, 0.54f, 0.52f, 0.52f, 0.54f, 0.58f, 0.64f};

TEST(Kvcompose, StructuredLayerCountsComeFromTheCompositeRankingWithTheFirstLayerMax) {
  const KvcomposeMethod m(params());
  // cr 0.5: n = floor(8 · 0.5) = 4 of the composites {C_0 = C_1 = (0.64, 0.58, ...)}: the pairs
  // 0.64, 0.64, 0.58, 0.58 → 2 per layer. (Without the first layer's max, layer 1 would take all
  // four and layer 0 only its floor of 1.)
  const KvcomposeCounts c = m.counts(kToy, 2, 2, 4, 0.5);
  EXPECT_EQ(c.per_layer, (std::vector<std::int64_t>{2, 2}));
  // Every head keeps its OWN best 2 positions.
  const Selection s = m.select_from_scores(kToy, 2, 2, 4, 0.5);
  EXPECT_EQ(s.kept[0], (Kept{{0, 1}, {2, 3}}));
  EXPECT_EQ(s.kept[1], (Kept{{0, 1}, {2, 3}}));
  // cr 0: everything.
  const Selection all = m.select_from_scores(kToy, 2, 2, 4, 0.0);
  EXPECT_EQ(all.kept[0], (Kept{{0, 1, 2, 3}, {0, 1, 2, 3}}));
}

TEST(Kvcompose, UnstructuredHeadCountsComeFromOneRankingOverAllHeads) {
  const KvcomposeMethod m(params(false));
  // cr 0.25: n = floor(16 · 0.75) = 12 of all heads' sorted scores: layer 1's eight (≥ 0.52),
  // then 0.50, 0.50, 0.03, 0.03 of layer 0 → 2, 2 | 4, 4.
  const KvcomposeCounts c = m.counts(kToy, 2, 2, 4, 0.25);
  EXPECT_EQ(c.per_head, (std::vector<std::vector<std::int64_t>>{{2, 2}, {4, 4}}));
  const Selection s = m.select_from_scores(kToy, 2, 2, 4, 0.25);
  EXPECT_EQ(s.kept[0], (Kept{{0, 1}, {2, 3}}));
  EXPECT_EQ(s.kept[1], (Kept{{0, 1, 2, 3}, {0, 1, 2, 3}}));
  EXPECT_EQ(s.kept_entries(), 12);
}

TEST(Kvcompose, MaxHeadAggregationAndTheLowerBound) {
  KvcomposeParams p = params();
  p.agg_head = KvcomposeAggregation::max;
  // Layer 0's heads differ: head 0 sorted (0.9, 0.1), head 1 (0.2, 0.15); layer 1 (0.3, 0.25) both.
  // max composite: C_0 = (0.9, 0.15), C_1 = (0.3, 0.25) → C_0 = max = (0.9, 0.25) (a tie with
  // layer 1's 0.25). cr 0.5: n = 2 → 0.9 (layer 0), 0.3 (layer 1) → 1, 1. The mean composite
  // would give C_0 = (0.55, 0.125) and the same counts; cr 0.25: n = 3 → 0.9, 0.3, then 0.25
  // tied between the layers.
  const std::vector<float> scores = {0.9f, 0.1f, 0.15f, 0.2f, 0.3f, 0.25f, 0.25f, 0.3f};
  EXPECT_EQ(KvcomposeMethod(p).counts(scores, 2, 2, 2, 0.5).per_layer,
            (std::vector<std::int64_t>{1, 1}));
  // keep_token_lower_bound 2: every layer keeps at least 2 (+1e9 on the first two ranks, and the
  // floor), even at cr 0.75 where n = 1.
  p.keep_token_lower_bound = 2;
  EXPECT_EQ(KvcomposeMethod(p).counts(scores, 2, 2, 2, 0.75).per_layer,
            (std::vector<std::int64_t>{2, 2}));
  // A lower bound above b keeps every position (capped at b).
  p.keep_token_lower_bound = 9;
  const Selection s = KvcomposeMethod(p).select_from_scores(scores, 2, 2, 2, 0.75);
  EXPECT_EQ(s.kept[1], (Kept{{0, 1}, {0, 1}}));
}

TEST(Kvcompose, BudgetOneStillKeepsOneTokenPerLayer) {
  // cr 0.9: n = max(1, floor(8 · 0.1)) = 1; the structured floor max(1, 0) = 1 keeps one token in
  // the other layer too: each head its own best.
  const Selection s = KvcomposeMethod(params()).select_from_scores(kToy, 2, 2, 4, 0.9);
  EXPECT_EQ(s.kept[0], (Kept{{0}, {2}}));
  EXPECT_EQ(s.kept[1], (Kept{{0}, {3}}));
  // Unstructured: one entry in all, the best (0.64, layer 1; head 0 or 1).
  const Selection u = KvcomposeMethod(params(false)).select_from_scores(kToy, 2, 2, 4, 0.9);
  EXPECT_EQ(u.kept_entries(), 1);
  EXPECT_TRUE(u.kept[0][0].empty() && u.kept[0][1].empty());
}

TEST(Kvcompose, SelectReadsThePassAndRefusesWhatDoesNotFit) {
  OwnedLayer o = testing::zero_layer(2, 2, 4, 2);
  o.num_layers = 2;
  OwnedLayer o1 = o;
  o1.layer = 1;
  const std::vector<LayerCapture> layers = {o.view(), o1.view()};
  KvcomposeParams p = params();
  p.add_mean_across_heads = false;  // the pass's scores are the toy's token scores
  const KvcomposeMethod m(p);
  ExtraPassResult pass = testing::empty_pass_result(2, 2, 4);
  pass.scores = kToy;
  const Selection s = m.select(layers, {.compression = 0.5}, {.extra_pass = &pass});
  EXPECT_EQ(s.kept[0], (Kept{{0, 1}, {2, 3}}));
  EXPECT_EQ(s.kept[1], (Kept{{0, 1}, {2, 3}}));
  EXPECT_THROW(m.select(layers, {.compression = 0.5}, {}), std::invalid_argument);
  const ExtraPassResult wrong = testing::empty_pass_result(1, 2, 4);
  EXPECT_THROW(m.select(layers, {.compression = 0.5}, {.extra_pass = &wrong}),
               std::invalid_argument);
  EXPECT_THROW(m.select(layers, {.compression = 1.0}, {.extra_pass = &pass}),
               std::invalid_argument);
  // observe() refuses a chunk that is not the whole cache.
  ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
  const PassRows rows;
  EXPECT_THROW(m.observe(tiny_layer().view(), PassChunk{{}, 1, 3}, rows.view(), r),
               std::invalid_argument);
}

TEST(Kvcompose, CatalogueAndFactory) {
  const auto make = [](std::map<std::string, ParamValue> values) {
    return make_method(MethodConfig{"k", "kvcompose", "", std::move(values)});
  };
  const auto a = make({});
  EXPECT_EQ(a->name(), "kvcompose");
  ASSERT_NE(a->extra_pass(), nullptr);
  const auto& defaults = std::get<KvcomposeParams>(a->parameters());
  EXPECT_TRUE(defaults.structured);
  EXPECT_EQ(defaults.agg_task, KvcomposeAggregation::max);
  EXPECT_EQ(defaults.agg_group, KvcomposeAggregation::mean);
  EXPECT_EQ(defaults.agg_head, KvcomposeAggregation::mean);
  EXPECT_FALSE(defaults.add_v_norm);
  EXPECT_TRUE(defaults.add_mean_across_heads);
  EXPECT_EQ(defaults.keep_token_lower_bound, 0);
  const auto b = make({{"structured", false},
                       {"agg_task", std::string("mean")},
                       {"agg_group", std::string("max")},
                       {"agg_head", std::string("max")},
                       {"add_v_norm", true},
                       {"add_mean_across_heads", false},
                       {"keep_token_lower_bound", std::int64_t{8}}});
  const auto& p = std::get<KvcomposeParams>(b->parameters());
  EXPECT_FALSE(p.structured);
  EXPECT_EQ(p.agg_task, KvcomposeAggregation::mean);
  EXPECT_EQ(p.agg_group, KvcomposeAggregation::max);
  EXPECT_EQ(p.agg_head, KvcomposeAggregation::max);
  EXPECT_TRUE(p.add_v_norm);
  EXPECT_FALSE(p.add_mean_across_heads);
  EXPECT_EQ(p.keep_token_lower_bound, 8);
  // Bad values are refused (the manifest checks the same at plan time:
  // tests/manifest/malformed/kvcompose_unknown_agg_task.toml).
  EXPECT_THROW(make({{"agg_task", std::string("median")}}), std::invalid_argument);
  EXPECT_THROW(make({{"keep_token_lower_bound", std::int64_t{-1}}}), std::invalid_argument);
  KvcomposeParams negative;
  negative.keep_token_lower_bound = -1;
  EXPECT_THROW(KvcomposeMethod{negative}, std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::methods
