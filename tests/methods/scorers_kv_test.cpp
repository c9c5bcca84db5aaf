// Group scorers_kv: LagKV (methods/lagkv.h), CUR (methods/cur.h) and SimLayerKV
// (methods/simlayerkv.h) on hand-computed inputs — every formula step, the budget/selection rule,
// the edge cases (short prompts, sinks, thresholds at and above 1) — plus the factory/catalogue
// bindings and a check that the committed golden exercises both lazy and busy SimLayerKV layers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/catalog.h"
#include "methods/cur.h"
#include "methods/lagkv.h"
#include "methods/method_factory.h"
#include "methods/scorer_method.h"
#include "methods/simlayerkv.h"
#include "tests/methods/test_capture.h"

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit::methods {
namespace {

using testing::OwnedLayer;
using testing::zero_layer;

std::vector<float> scores_of(const Scorer& s, const OwnedLayer& o) {
  std::vector<float> out(static_cast<std::size_t>(o.num_kv_heads) *
                         static_cast<std::size_t>(o.length));
  s.score(o.view(), {}, out);
  return out;
}

void expect_near(const std::vector<float>& got, const std::vector<double>& want,
                 double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "index " << i;
}

// ---------------------------------------------------------------------------------------------
// LagKV

// n_sink 1, lag_size 2, d 2, L 6: P = floor(5/2) = 2 partitions; partition 0 (positions 1, 2) is
// scored against partition 1 (positions 3, 4); the sink 0, the last partition and the remainder
// (3, 4, 5) score 1.
//   Keys:   K3 = (0, 0), K4 = (2, 4)  → lo = (0, 0), range = (2, 4)
//           K1 = (1, 1) → z = (0.5, 0.25), std (unbiased, d − 1 = 1) = 0.25/√2 = 0.1767767
//           K2 = (2, 0) → z = (1, 0),      std = 1/√2 = 0.7071068
//           softmax: e^{0.7071068 − 0.1767767} = e^{0.5303301} = 1.6994932
//                    → πK = (1/2.6994932, 1.6994932/2.6994932) = (0.3704399, 0.6295601)
//   Values: V3 = (0, 0), V4 = (1, 1)  → range (1, 1)
//           V1 = (0.5, 0.5) → std 0;  V2 = (1, 0) → std 0.7071068
//           softmax: e^{0.7071068} = 2.0281150 → πV = (0.3302384, 0.6697616)
//   s = (πK + πV)/2 = (0.3503392, 0.6496608)
//   cross_scoring: [1, 0.3503392, 0.6496608, 1, 1, 1]; ranks / lag_size: [1, 0, 0.5, 1, 1, 1].
OwnedLayer lag_example() {
  auto o = zero_layer(1, 1, 6, 2);
  o.keys[0] = {9, 9, 1, 1, 2, 0, 0, 0, 2, 4, 7, 7};
  o.values[0] = {9, 9, 0.5f, 0.5f, 1, 0, 0, 0, 1, 1, 7, 7};
  return o;
}

TEST(LagKv, RanksWithinPartitionsSinksAndTailScoreOne) {
  const LagKvScorer s(LagKvParams{.n_sink = 1, .lag_size = 2, .cross_scoring = false});
  expect_near(scores_of(s, lag_example()), {1, 0, 0.5, 1, 1, 1});
}

TEST(LagKv, CrossScoringKeepsTheRawLagRelativeScores) {
  const LagKvScorer s(LagKvParams{.n_sink = 1, .lag_size = 2, .cross_scoring = true});
  expect_near(scores_of(s, lag_example()), {1, 0.3503392, 0.6496608, 1, 1, 1});
}

TEST(LagKv, TiedScoresRankAsTorchsUnstableArgsort) {
  // n_sink 0, lag_size 17, L 34: partition 0 (positions 0..16) has identical rows, so all 17
  // scores tie; torch 2.15 on the CPU: torch.zeros(17).argsort() =
  //   [8, 16, 15, 14, 13, 12, 11, 10, 9, 0, 7, 6, 5, 4, 3, 2, 1]
  // (std::sort of (value, index) pairs, not stable), so position 8 gets rank 0, 16 rank 1, ...,
  // 0 rank 9, 7 rank 10, ..., 1 rank 16; scores are rank / 17.
  auto o = zero_layer(1, 1, 34, 2);
  for (std::size_t j = 17; j < 34; ++j) {  // a reference partition with a non-zero range
    o.keys[0][2 * j] = static_cast<float>(j);
    o.values[0][2 * j + 1] = static_cast<float>(j);
  }
  const auto got = scores_of(LagKvScorer(LagKvParams{.n_sink = 0, .lag_size = 17}), o);
  const std::vector<int> order{8, 16, 15, 14, 13, 12, 11, 10, 9, 0, 7, 6, 5, 4, 3, 2, 1};
  for (std::size_t rank = 0; rank < order.size(); ++rank)
    EXPECT_FLOAT_EQ(got[static_cast<std::size_t>(order[rank])], static_cast<float>(rank) / 17.0f)
        << "position " << order[rank];
  for (std::size_t j = 17; j < 34; ++j) EXPECT_EQ(got[j], 1.0f) << j;
}

TEST(LagKv, SelectionEvictsTheLowerRankedTokenOfTheScoredPartition) {
  // cr 0.1: n_kept = floor(6 · 0.9) = 5 → everything but position 1 (rank 0).
  const ScorerMethod m(std::make_shared<LagKvScorer>(LagKvParams{.n_sink = 1, .lag_size = 2}));
  const auto sel = m.select(std::vector{lag_example().view()}, Budget{.compression = 0.1}, {});
  EXPECT_EQ(sel.kept[0][0], (std::vector<std::int32_t>{0, 2, 3, 4, 5}));
}

TEST(LagKv, ShortPromptRampKeepsSinksThenTheMostRecent) {
  // L = 5 < n_sink + 2·lag_size = 1 + 6: sink 1, then i/(L − n_sink) = 0, 1/4, 2/4, 3/4.
  auto o = zero_layer(2, 2, 5, 2);
  const LagKvScorer s(LagKvParams{.n_sink = 1, .lag_size = 3});
  expect_near(scores_of(s, o), {1, 0, 0.25, 0.5, 0.75, 1, 0, 0.25, 0.5, 0.75});
  // cr 0.5: n_kept = 2 → the sink and the last token.
  const auto sel =
      ScorerMethod(std::make_shared<LagKvScorer>(LagKvParams{.n_sink = 1, .lag_size = 3}))
          .select(std::vector{o.view()}, Budget{.compression = 0.5}, {});
  EXPECT_EQ(sel.kept[0][0], (std::vector<std::int32_t>{0, 4}));
  // L ≤ n_sink: everything scores 1.
  auto tiny = zero_layer(1, 1, 3, 2);
  expect_near(scores_of(LagKvScorer(LagKvParams{.n_sink = 4}), tiny), {1, 1, 1});
}

TEST(LagKv, Bf16RoundsTheRamp) {
  // L − n_sink = 3: 1/3 → bf16 0.333984375, 2/3 → 0.66796875 (torch casts the fp32 ramp).
  auto o = zero_layer(1, 1, 4, 2);
  o.bf16 = true;
  const auto got = scores_of(LagKvScorer(LagKvParams{.n_sink = 1, .lag_size = 8}), o);
  EXPECT_EQ(got, (std::vector<float>{1, 0, 0.333984375f, 0.66796875f}));
}

TEST(LagKv, RejectsBadParameters) {
  EXPECT_THROW(LagKvScorer(LagKvParams{.lag_size = 0}), std::invalid_argument);
  EXPECT_THROW(LagKvScorer(LagKvParams{.n_sink = -1}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// CUR

// L 4, d 2, one head, num_sinks 1:
//   K = (1,0), (1,1), (2,0), (0,1) → k2 = 1, 2, 4, 1
//   V = (1,1), (0,1), (1,0), (0,3) → v2 = 2, 1, 1, 9
// Local windows of 2 ([0,1], [2,3]): k2 → 1/3, 2/3, 4/5, 1/5; v2 → 2/3, 1/3, 1/10, 9/10.
OwnedLayer cur_example() {
  auto o = zero_layer(1, 1, 4, 2);
  o.keys[0] = {1, 0, 1, 1, 2, 0, 0, 1};
  o.values[0] = {1, 1, 0, 1, 1, 0, 0, 3};
  return o;
}

std::vector<float> cur_scores(CurLeverage type, bool local, int window, int sinks = 1) {
  return scores_of(CurScorer(CurParams{.num_sinks = sinks,
                                       .leverage_type = type,
                                       .use_local_approximation = local,
                                       .local_window_size = window}),
                   cur_example());
}

TEST(Cur, KvProductOfLocallyNormalisedNorms) {
  // products 2/9, 2/9, 0.08, 0.18, sum 0.7044444 → 0.3154574, 0.3154574, 0.1135647, 0.2555205;
  // the sink (position 0) scores 1.
  expect_near(cur_scores(CurLeverage::kv_product, true, 2), {1, 0.3154574, 0.1135647, 0.2555205});
  // Without sinks position 0 keeps its normalised score.
  expect_near(cur_scores(CurLeverage::kv_product, true, 2, 0),
              {0.3154574, 0.3154574, 0.1135647, 0.2555205});
}

TEST(Cur, KeyValueAndAverageLeverages) {
  // key: (1/3, 2/3, 4/5, 1/5) / 2 = 1/6, 1/3, 0.4, 0.1
  expect_near(cur_scores(CurLeverage::key, true, 2), {1, 1.0 / 3, 0.4, 0.1});
  // value: (2/3, 1/3, 1/10, 9/10) / 2 = 1/3, 1/6, 0.05, 0.45
  expect_near(cur_scores(CurLeverage::value, true, 2), {1, 1.0 / 6, 0.05, 0.45});
  // kv_avg: (0.5, 0.5, 0.45, 0.55) / 2 = 0.25, 0.25, 0.225, 0.275
  expect_near(cur_scores(CurLeverage::kv_avg, true, 2), {1, 0.25, 0.225, 0.275});
}

TEST(Cur, GlobalNormsAndPartialLastWindow) {
  // No local approximation: k2·v2 = 2, 2, 4, 9 over 17.
  expect_near(cur_scores(CurLeverage::kv_product, false, 2), {1, 2.0 / 17, 4.0 / 17, 9.0 / 17});
  // Windows of 3 ([0,1,2], [3] padded with zeros): k2 → 1/7, 2/7, 4/7, 1; key over 2 →
  // 1/14, 1/7, 2/7, 1/2.
  expect_near(cur_scores(CurLeverage::key, true, 3), {1, 1.0 / 7, 2.0 / 7, 0.5});
}

TEST(Cur, SelectionKeepsSinksThenHighestLeverage) {
  // kv_product, windows of 2, cr 0.5 → n_kept 2: the sink and position 1 (0.315 > 0.256 > 0.114).
  const ScorerMethod m(
      std::make_shared<CurScorer>(CurParams{.num_sinks = 1, .local_window_size = 2}));
  const auto sel = m.select(std::vector{cur_example().view()}, Budget{.compression = 0.5}, {});
  EXPECT_EQ(sel.kept[0][0], (std::vector<std::int32_t>{0, 1}));
  // cr 0.9 → n_kept = max(1, floor(0.4)) = 1: the sink alone.
  const auto one = m.select(std::vector{cur_example().view()}, Budget{.compression = 0.9}, {});
  EXPECT_EQ(one.kept[0][0], (std::vector<std::int32_t>{0}));
}

TEST(Cur, RejectsBadParameters) {
  EXPECT_THROW(CurScorer(CurParams{.local_window_size = 0}), std::invalid_argument);
  EXPECT_THROW(CurScorer(CurParams{.num_sinks = -1}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// SimLayerKV

// L 8, H = Hkv = 1, d 2, one window row (the last query). n_initial 1, n_recent 3, n_last 1:
// min_length = 5 < 8; the test reads columns j < L − n_last = 7: a(0) and the recent a(4..6) (the
// window's own column 7 is not counted); a lazy layer keeps position 0 and the last
// n_recent − n_last = 2 (6, 7).
OwnedLayer simlayer_layer(float first_key_x, int layer_index = 0, float last_key_x = 0.0f) {
  auto o = zero_layer(1, 1, 8, 2);
  o.layer = layer_index;
  o.num_layers = 2;
  o.keys[0][0] = first_key_x;
  o.keys[0][14] = last_key_x;
  o.window_rows = 1;
  o.window_queries = {std::sqrt(2.0f), 0};  // q·k/√d = k_x
  return o;
}

const SimLayerKvParams kSmall{.n_last = 1, .n_recent = 3, .n_initial = 1};

TEST(SimLayerKv, UniformAttentionLazyScoreIsInitialPlusRecentShare) {
  // All keys zero: a(j) = 1/8; λ = a(0) + a(4) + a(5) + a(6) = 0.5. Lazy iff λ > τ (strict).
  const SimLayerKvMethod m(kSmall);
  const auto o = simlayer_layer(0.0f);
  EXPECT_NEAR(m.test_layer(o.view(), 0.4).lazy_score, 0.5, 1e-6);
  EXPECT_TRUE(m.test_layer(o.view(), 0.4).lazy);
  EXPECT_FALSE(m.test_layer(o.view(), 0.5).lazy);
  EXPECT_FALSE(m.test_layer(o.view(), 0.6).lazy);
}

TEST(SimLayerKv, ConcentratedAttentionOnTheFirstToken) {
  // K0 = (ln 7, 0): logits ln 7, 0 × 7 → a(0) = 7/14 = 0.5, others 1/14; λ = 0.5 + 3/14 =
  // 0.7142857.
  const SimLayerKvMethod m(kSmall);
  const auto o = simlayer_layer(std::log(7.0f));
  EXPECT_NEAR(m.test_layer(o.view(), 0.7).lazy_score, 0.7142857, 1e-6);
  EXPECT_TRUE(m.test_layer(o.view(), 0.7).lazy);
  EXPECT_FALSE(m.test_layer(o.view(), 0.72).lazy);
}

TEST(SimLayerKv, TheWindowsOwnColumnsAreNotCounted) {
  // K7 = (ln 7, 0): the last query puts 7/14 on itself and 1/14 on every other key; the test reads
  // columns 0..6 only: λ = 4/14 = 0.2857143 (counting column 7 would give 10/14).
  const SimLayerKvMethod m(kSmall);
  const auto o = simlayer_layer(0.0f, 0, std::log(7.0f));
  EXPECT_NEAR(m.test_layer(o.view(), 0.2).lazy_score, 4.0 / 14, 1e-6);
  EXPECT_TRUE(m.test_layer(o.view(), 0.28).lazy);
  EXPECT_FALSE(m.test_layer(o.view(), 0.3).lazy);
}

TEST(SimLayerKv, LazyLayersKeepInitialAndRecentOthersKeepAll) {
  // Layer 0: λ = 0.7142857 (lazy at τ 0.6); layer 1: λ = 0.5 (busy).
  const SimLayerKvMethod m(kSmall);
  const auto lazy = simlayer_layer(std::log(7.0f), 0);
  const auto busy = simlayer_layer(0.0f, 1);
  const auto sel = m.select(std::vector{lazy.view(), busy.view()}, Budget{.threshold = 0.6}, {});
  ASSERT_EQ(sel.kept.size(), 2u);
  EXPECT_EQ(sel.kept[0][0], (std::vector<std::int32_t>{0, 6, 7}));
  EXPECT_EQ(sel.kept[1][0], (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(SimLayerKv, GroupedHeadsAverageAndShareTheKeptSet) {
  // H = 2 query heads on Hkv = 1 KV head, K0 = (ln 7, 0): head 0 queries (√2, 0) (λ₀ = 0.7142857),
  // head 1 queries zero (uniform, λ₁ = 0.5); a(j) averages the heads: λ = 0.6071429 → lazy at
  // τ 0.6, busy at 0.61.
  auto o = zero_layer(1, 2, 8, 2);
  o.keys[0][0] = std::log(7.0f);
  o.window_rows = 1;
  o.window_queries = {std::sqrt(2.0f), 0, 0, 0};
  const SimLayerKvMethod m(kSmall);
  EXPECT_NEAR(m.test_layer(o.view(), 0.6).lazy_score, (0.7142857 + 0.5) / 2, 1e-6);
  const auto sel = m.select(std::vector{o.view()}, Budget{.threshold = 0.6}, {});
  EXPECT_EQ(sel.kept[0][0], (std::vector<std::int32_t>{0, 6, 7}));
  EXPECT_FALSE(m.test_layer(o.view(), 0.61).lazy);
  // Two KV heads (each its own group) share the layer's decision and kept set.
  auto two = zero_layer(2, 2, 8, 2);
  two.keys[0][0] = std::log(7.0f);
  two.window_rows = 1;
  two.window_queries = {std::sqrt(2.0f), 0, std::sqrt(2.0f), 0};
  const auto both = m.select(std::vector{two.view()}, Budget{.threshold = 0.6}, {});
  EXPECT_EQ(both.kept[0][0], (std::vector<std::int32_t>{0, 6, 7}));
  EXPECT_EQ(both.kept[0][1], both.kept[0][0]);
}

TEST(SimLayerKv, NoEvictionAtThresholdOneOrAboveOrForShortPrompts) {
  const SimLayerKvMethod m(kSmall);
  const auto o = simlayer_layer(std::log(7.0f));
  for (const double t : {1.0, 1.5}) {
    const auto sel = m.select(std::vector{o.view()}, Budget{.threshold = t}, {});
    EXPECT_EQ(sel.kept[0][0].size(), 8u) << t;
    EXPECT_FALSE(m.test_layer(o.view(), t).compressible);
  }
  // L = 5 = n_initial + n_recent + n_last: kvpress applies no compression.
  auto short_layer = zero_layer(1, 1, 5, 2);
  short_layer.window_rows = 1;
  short_layer.window_queries = {0, 0};
  const auto sel = m.select(std::vector{short_layer.view()}, Budget{.threshold = 0.01}, {});
  EXPECT_EQ(sel.kept[0][0].size(), 5u);
}

TEST(SimLayerKv, RejectsBadThresholdsAndParameters) {
  const SimLayerKvMethod m(kSmall);
  const auto o = simlayer_layer(0.0f);
  EXPECT_THROW(m.select(std::vector{o.view()}, Budget{.threshold = 0.0}, {}),
               std::invalid_argument);
  EXPECT_THROW(m.select(std::vector{o.view()}, Budget{.threshold = NAN}, {}),
               std::invalid_argument);
  EXPECT_THROW(SimLayerKvMethod(SimLayerKvParams{.n_last = 2, .n_recent = 2}),
               std::invalid_argument);
  EXPECT_THROW(SimLayerKvMethod(SimLayerKvParams{.n_last = 0}), std::invalid_argument);
  EXPECT_EQ(m.window_needed(), 1);
}

// ---------------------------------------------------------------------------------------------
// Catalogue and factory

MethodConfig cfg(std::string id, std::map<std::string, ParamValue> params = {}) {
  return MethodConfig{"x", std::move(id), "", std::move(params)};
}

TEST(ScorersKvCatalog, AxesDefaultsAndFactory) {
  ASSERT_NE(find_method("lagkv"), nullptr);
  ASSERT_NE(find_method("cur"), nullptr);
  ASSERT_NE(find_method("simlayerkv"), nullptr);
  EXPECT_EQ(find_method("lagkv")->axis, BudgetAxis::ratio);
  EXPECT_EQ(find_method("cur")->axis, BudgetAxis::ratio);
  EXPECT_EQ(find_method("simlayerkv")->axis, BudgetAxis::threshold);
  EXPECT_TRUE(find_method("lagkv")->is_scorer);
  EXPECT_TRUE(find_method("cur")->is_scorer);
  EXPECT_FALSE(find_method("simlayerkv")->is_scorer);

  const auto lag = make_method(cfg("lagkv", {{"lag_size", std::int64_t{16}}}), {});
  const auto& lp = std::get<LagKvParams>(lag->parameters());
  EXPECT_EQ(lp.lag_size, 16);
  EXPECT_EQ(lp.n_sink, 4);
  EXPECT_FALSE(lp.cross_scoring);
  EXPECT_EQ(lag->name(), "lagkv");

  const auto cur = make_method(cfg("cur", {{"leverage_type", std::string("kv_avg")}}), {});
  const auto& cp = std::get<CurParams>(cur->parameters());
  EXPECT_EQ(cp.leverage_type, CurLeverage::kv_avg);
  EXPECT_EQ(cp.num_sinks, 4);
  EXPECT_TRUE(cp.use_local_approximation);
  EXPECT_EQ(cp.local_window_size, 16);

  const auto sim = make_method(cfg("simlayerkv"), {});
  const auto& sp = std::get<SimLayerKvParams>(sim->parameters());
  EXPECT_EQ(sp.n_last, 1);
  EXPECT_EQ(sp.n_recent, 1024);
  EXPECT_EQ(sp.n_initial, 4);
  EXPECT_EQ(sim->window_needed(), 1);
  EXPECT_THROW(make_scorer(cfg("simlayerkv"), {}), std::invalid_argument);
  // n_recent must exceed n_last (not expressible per parameter in the catalogue).
  EXPECT_THROW(
      make_method(cfg("simlayerkv", {{"n_recent", std::int64_t{4}}, {"n_last", std::int64_t{4}}}),
                  {}),
      std::invalid_argument);
}

// The committed golden exercises both outcomes of the lazy test at every threshold setting < 1
// (tools/golden/kvpress_groups/scorers_kv.py chose the thresholds from the prompts' lazy scores).
TEST(ScorersKvGolden, SimLayerKvCasesHaveLazyAndBusyLayers) {
  const auto path =
      std::filesystem::path(KVAUDIT_SOURCE_DIR) / "tests/golden/kvpress/kept_scorers_kv.json";
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing";
  std::ifstream in(path);
  const auto golden = nlohmann::json::parse(in);
  std::map<std::string, std::pair<int, int>> lazy_busy;  // press → (lazy, busy) layers at τ < 1
  for (const auto& c : golden.at("cases")) {
    if (!c.contains("threshold") || c.at("threshold").get<double>() >= 1.0) continue;
    const int length = c.at("length").get<int>();
    for (const auto& layer : c.at("kept")) {
      auto& counts = lazy_busy[c.at("press").get<std::string>()];
      (static_cast<int>(layer.at(0).size()) < length ? counts.first : counts.second)++;
    }
  }
  EXPECT_EQ(lazy_busy.size(), 2u);
  for (const auto& [press, counts] : lazy_busy) {
    EXPECT_GT(counts.first, 0) << press;
    EXPECT_GT(counts.second, 0) << press;
  }
}

}  // namespace
}  // namespace kvaudit::methods
