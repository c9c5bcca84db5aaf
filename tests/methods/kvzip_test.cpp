// KVzip (methods/kvzip.h): the reconstruction prompt's chunks, the per-layer scores of a pass on
// hand-computed inputs (the key subset, causality among the pass's rows, the max over the group
// and rows, KVzip+'s norms, bf16 rounding), the global and layer-wise budget rules with sinks, and
// the factory/catalogue wiring.
#include "methods/kvzip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/catalog.h"
#include "methods/method_factory.h"
#include "methods/method_resolution.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

using Kept = std::vector<std::vector<std::int32_t>>;
using testing::OwnedLayer;
using testing::PassRows;

KvzipParams params(int n_sink = 4, bool layerwise = false,
                   KvzipVariant variant = KvzipVariant::kvzip, int chunk_size = 2048) {
  KvzipParams p;
  p.variant = variant;
  p.layerwise = layerwise;
  p.n_sink = n_sink;
  p.chunk_size = chunk_size;
  return p;
}

PassPrompt prompt(int prefix_length = 0) {
  PassPrompt p;
  p.prefix_length = prefix_length;
  p.suffix = {90};
  p.repeat_first = {80, 81};
  p.repeat_next = {70};
  return p;
}

TEST(Kvzip, OneChunkIsRepeatPromptSuffixAndTheContext) {
  const KvzipMethod m(params());
  const std::vector<std::int32_t> cached = {10, 11, 12, 13, 14};
  const auto chunks = m.chunks(cached, prompt());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].tokens, (std::vector<std::int32_t>{80, 81, 90, 10, 11, 12, 13, 14}));
  EXPECT_EQ(chunks[0].first, 0);
  EXPECT_EQ(chunks[0].end, 5);
  // The template head (prefix_length 2) is not reconstructed.
  const auto after_head = m.chunks(cached, prompt(2));
  ASSERT_EQ(after_head.size(), 1u);
  EXPECT_EQ(after_head[0].tokens, (std::vector<std::int32_t>{80, 81, 90, 12, 13, 14}));
  EXPECT_EQ(after_head[0].first, 2);
  // Nothing to reconstruct: no pass at all.
  EXPECT_TRUE(m.chunks(cached, prompt(5)).empty());
}

TEST(Kvzip, LaterChunksRepeatTheLastEightTokensOfThePreviousChunk) {
  // 21 context tokens (after a 1-token head), chunk_size 10: chunks [1,11), [11,21), [21,22).
  const KvzipMethod m(params(4, false, KvzipVariant::kvzip, 10));
  std::vector<std::int32_t> cached(22);
  for (int i = 0; i < 22; ++i) cached[static_cast<std::size_t>(i)] = 100 + i;
  const auto chunks = m.chunks(cached, prompt(1));
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[1].first, 11);
  EXPECT_EQ(chunks[1].end, 21);
  // repeat_next, the 8 last tokens of chunk 0 (positions 3..10), suffix, positions 11..20.
  std::vector<std::int32_t> want = {70, 103, 104, 105, 106, 107, 108, 109, 110, 90};
  for (int i = 11; i < 21; ++i) want.push_back(100 + i);
  EXPECT_EQ(chunks[1].tokens, want);
  EXPECT_EQ(chunks[2].first, 21);
  EXPECT_EQ(chunks[2].end, 22);
  EXPECT_EQ(chunks[2].tokens.size(), 1u + 8u + 1u + 1u);
  // Without the ids the runner must supply, the pass refuses.
  PassPrompt missing = prompt(1);
  missing.repeat_next.clear();
  EXPECT_THROW(m.chunks(cached, missing), std::invalid_argument);
  EXPECT_THROW(m.chunks(cached, PassPrompt{}), std::invalid_argument);
}

TEST(Kvzip, ScoreIsTheMaxOverRowsAndGroupOfTheSoftmaxOverSinksChunkAndOwnRows) {
  const OwnedLayer o = testing::reconstruction_toy_layer();
  const KvzipMethod m(params());
  // Two rows. Head 0: row 0 q = 1, row 1 q = 0; head 1: q = 0. Own keys: row 0 → 0, row 1 →
  // ln 100 (a row must not see a later row: with it row 0's weights would shrink 100-fold).
  PassRows rows{{1, 0, 0, 0}, {0, std::log(100.0f)}, {0, 0}, {0, 0, 0, 0}};
  PassChunk chunk{{}, 0, 3};
  ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
  m.observe(o.view(), chunk, rows.view(), r);
  // Head 0 row 0: exp (1, 2, 3 | own 1) / 7. Row 1: all logits 0 over 5 columns → 1/5.
  // Head 1: 1/4 (row 0), 1/5 (row 1). Max per position: max(1/7, 1/4) = 1/4, 2/7, 3/7.
  EXPECT_NEAR(r.at(0, 0, 0), 0.25f, 1e-6f);
  EXPECT_NEAR(r.at(0, 0, 1), 2.0f / 7.0f, 1e-6f);
  EXPECT_NEAR(r.at(0, 0, 2), 3.0f / 7.0f, 1e-6f);
}

TEST(Kvzip, TheSoftmaxRunsOverTheSinksAndTheChunkOnly) {
  // Chunk [2, 3) with n_sink = 1: columns = key 0 (sink), key 2, the own key; key 1 is left out.
  const OwnedLayer o = testing::reconstruction_toy_layer();
  const KvzipMethod m(params(1));
  PassRows rows{{1, 0}, {0}, {0}, {0, 0}};
  ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
  m.observe(o.view(), PassChunk{{}, 2, 3}, rows.view(), r);
  // Head 0: exp (1, 3, 1) → 3/5 (over all cached keys it would be 3/7); head 1: 1/3.
  EXPECT_NEAR(r.at(0, 0, 2), 0.6f, 1e-6f);
  EXPECT_EQ(r.at(0, 0, 0), 0.0f);  // not reconstructed by this chunk
  EXPECT_EQ(r.at(0, 0, 1), 0.0f);
}

TEST(Kvzip, PlusDividesByTheRowNormAndMultipliesByTheValueOutputNorm) {
  const OwnedLayer o = testing::reconstruction_toy_layer();
  const KvzipMethod m(params(4, false, KvzipVariant::kvzip_plus));
  // One row, x = (3, 4): 1/‖x‖ = 0.2. Head 0 weights (1, 2, 3)/7 × 0.2 × 5·|v| = (1, 4, 3)/7;
  // head 1: 1/4 × 0.2 × |v| = (0.05, 0.1, 0.05). Max: 1/7, 4/7, 3/7.
  PassRows rows{{1, 0}, {0}, {0}, {3, 4}};
  ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
  m.observe(o.view(), PassChunk{{}, 0, 3}, rows.view(), r);
  EXPECT_NEAR(r.at(0, 0, 0), 1.0f / 7.0f, 1e-6f);
  EXPECT_NEAR(r.at(0, 0, 1), 4.0f / 7.0f, 1e-6f);
  EXPECT_NEAR(r.at(0, 0, 2), 3.0f / 7.0f, 1e-6f);
}

TEST(Kvzip, Bf16ModelsRoundTheWeights) {
  const OwnedLayer o = testing::reconstruction_toy_layer(/*bf16=*/true);
  const KvzipMethod m(params());
  PassRows rows{{1, 0}, {0}, {0}, {0, 0}};
  ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
  m.observe(o.view(), PassChunk{{}, 0, 3}, rows.view(), r);
  // bf16 logits: ln 2 → 0.69140625, ln 3 → 1.1015625; exp → 1, 1.99650, 3.00887 and the own
  // key's 1: p = 3.00887 / 7.00537 = 0.429509, rounded to the bf16 0.4296875. (Unrounded logits
  // would give 3/7 = 0.428571, whose bf16 is 0.427734375.)
  EXPECT_EQ(r.at(0, 0, 2), 0.4296875f);
}

TEST(Kvzip, RowsOfAnotherShapeAreRefused) {
  const OwnedLayer o = testing::reconstruction_toy_layer();
  const KvzipMethod m(params());
  PassRows rows{{1}, {0}, {0}, {0, 0}};  // one query for two heads
  ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
  EXPECT_THROW(m.observe(o.view(), PassChunk{{}, 0, 3}, rows.view(), r), std::invalid_argument);
}

// Two layers, one KV head, L = 5, n_sink = 1.
//   layer 0: (0, 0.9, 0.8, 0.7, 0.6), layer 1: (0, 0.1, 0.2, 0.3, 0.4); the sinks get 0.9 + 1.
ExtraPassResult two_layer_scores() {
  ExtraPassResult r = testing::empty_pass_result(2, 1, 5);
  r.scores = {0, 0.9f, 0.8f, 0.7f, 0.6f, 0, 0.1f, 0.2f, 0.3f, 0.4f};
  return r;
}

TEST(Kvzip, GlobalBudgetPrunesTheLowestEntriesOfAllLayersTogether) {
  const KvzipMethod m(params(1));
  // N = 10, cr 0.4 → int(4.0) = 4 pruned: all from layer 1 (0.1 .. 0.4).
  auto sel = m.select_from_scores(two_layer_scores(), 0.4, false);
  EXPECT_EQ(sel.kept[0], (Kept{{0, 1, 2, 3, 4}}));
  EXPECT_EQ(sel.kept[1], (Kept{{0}}));
  // cr 0.75 → int(7.5) = 7: layer 1's 4, then 0.6, 0.7, 0.8; the sinks (1.9) survive.
  sel = m.select_from_scores(two_layer_scores(), 0.75, false);
  EXPECT_EQ(sel.kept[0], (Kept{{0, 1}}));
  EXPECT_EQ(sel.kept[1], (Kept{{0}}));
  // cr = 0 keeps everything (kvpress compresses only for cr > 0).
  EXPECT_EQ(m.select_from_scores(two_layer_scores(), 0.0, false).kept_entries(), 10);
}

TEST(Kvzip, LayerwiseBudgetPrunesTheSameCountInEveryLayer) {
  const KvzipMethod m(params(1, /*layerwise=*/true));
  // int(5 · 0.4) = 2 per layer.
  const auto sel = m.select_from_scores(two_layer_scores(), 0.4, false);
  EXPECT_EQ(sel.kept[0], (Kept{{0, 1, 2}}));
  EXPECT_EQ(sel.kept[1], (Kept{{0, 3, 4}}));
}

TEST(Kvzip, HeadsOfALayerCompeteAndSinksAreTheGlobalMaxPlusOne) {
  // One layer, Hkv = 2, L = 4, n_sink = 2. Head 0 (0.5, 0.5, 0.3, 0.2), head 1 (0.1, 0, 0.9,
  // 0.05): the sinks of both heads become 1.9, so head 1's zero sink survives.
  ExtraPassResult r = testing::empty_pass_result(1, 2, 4);
  r.scores = {0.5f, 0.5f, 0.3f, 0.2f, 0.1f, 0.0f, 0.9f, 0.05f};
  const KvzipMethod m(params(2));
  // cr 0.25 → int(2.0) = 2 pruned: 0.05 (head 1) and 0.2 (head 0).
  const auto sel = m.select_from_scores(r, 0.25, false);
  EXPECT_EQ(sel.kept[0], (Kept{{0, 1, 2}, {0, 1, 2}}));
  // cr 0.9 → int(7.2) = 7 pruned: only one of the sink entries (tied at 1.9) survives.
  EXPECT_EQ(m.select_from_scores(r, 0.9, false).kept_entries(), 1);
}

TEST(Kvzip, SinksOutrankTheBestScore) {
  // L = 4, n_sink = 1: (0, 0.9, 0.5, 0.3); cr 0.75 → int(3.0) = 3 pruned, one kept: the sink
  // (0.9 + 1 = 1.9), not position 1.
  ExtraPassResult r = testing::empty_pass_result(1, 1, 4);
  r.scores = {0.0f, 0.9f, 0.5f, 0.3f};
  EXPECT_EQ(KvzipMethod(params(1)).select_from_scores(r, 0.75, false).kept[0], (Kept{{0}}));
  // n_sink = 0: nothing is protected.
  EXPECT_EQ(KvzipMethod(params(0)).select_from_scores(r, 0.75, false).kept[0], (Kept{{1}}));
}

TEST(Kvzip, SelectNeedsThePassResultOfItsShape) {
  OwnedLayer o = testing::zero_layer(1, 1, 5, 2);
  const KvzipMethod m(params(1));
  const std::vector<LayerCapture> layers = {o.view(), o.view()};
  EXPECT_THROW(m.select(layers, {.compression = 0.5}, {}), std::invalid_argument);
  const ExtraPassResult wrong = testing::empty_pass_result(1, 1, 5);
  EXPECT_THROW(m.select(layers, {.compression = 0.5}, {.extra_pass = &wrong}),
               std::invalid_argument);
  const ExtraPassResult right = two_layer_scores();
  const auto sel = m.select(layers, {.compression = 0.4}, {.extra_pass = &right});
  EXPECT_EQ(sel.kept[1], (Kept{{0}}));
}

TEST(Kvzip, CatalogueAndFactoryBuildBothVariantsSharingThePassAcrossLayerwise) {
  const auto make = [](std::string variant, std::map<std::string, ParamValue> values) {
    return make_method(MethodConfig{"k", "kvzip", std::move(variant), std::move(values)});
  };
  const auto a = make("", {});
  const auto b = make("kvzip_plus", {});
  const auto c = make("", {{"layerwise", true}});
  const auto d = make("", {{"n_sink", std::int64_t{8}}});
  EXPECT_EQ(a->name(), "kvzip");
  EXPECT_EQ(b->name(), "kvzip_plus");
  ASSERT_NE(a->extra_pass(), nullptr);
  ASSERT_NE(b->extra_pass(), nullptr);
  EXPECT_EQ(a->extra_pass()->pass_key(), c->extra_pass()->pass_key());
  EXPECT_NE(a->extra_pass()->pass_key(), b->extra_pass()->pass_key());
  EXPECT_NE(a->extra_pass()->pass_key(), d->extra_pass()->pass_key());
  const auto& p = std::get<KvzipParams>(c->parameters());
  EXPECT_TRUE(p.layerwise);
  EXPECT_EQ(p.chunk_size, 2048);
  EXPECT_EQ(std::get<KvzipParams>(b->parameters()).variant, KvzipVariant::kvzip_plus);
  EXPECT_THROW(KvzipMethod(params(4, false, KvzipVariant::kvzip, 0)), std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::methods
