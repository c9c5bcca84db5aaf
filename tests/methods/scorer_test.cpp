// Hand-computed cases for every scorer (tiny L, one or two heads): Knorm, StreamingLLM, SnapKV
// (both variants), TOVA (both variants), ObservedAttention, ExpectedAttention, KeyDiff (one-shot
// and block), Random; plus ScorerMethod's per-head top-k and the capture checks.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "methods/expected_attention.h"
#include "methods/keydiff.h"
#include "methods/knorm.h"
#include "methods/observed_attention.h"
#include "methods/random.h"
#include "methods/scorer_method.h"
#include "methods/snapkv.h"
#include "methods/streaming_llm.h"
#include "methods/top_k.h"
#include "methods/tova.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

using testing::OwnedLayer;
using testing::zero_layer;

std::vector<float> scores_of(const Scorer& s, const OwnedLayer& o, double cr = 0.5) {
  const auto layer = o.view();
  return score_layer(s, layer, Budget{.compression = cr}, SelectionContext{});
}

void expect_near(const std::vector<float>& got, const std::vector<double>& want,
                 double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "index " << i;
}

TEST(Knorm, NegativeL2NormPerHead) {
  auto o = zero_layer(2, 2, 2, 2);
  o.keys[0] = {3, 4, 0, 1};  // norms 5, 1
  o.keys[1] = {1, 1, 0, 0};  // norms √2, 0
  expect_near(scores_of(KnormScorer{}, o), {-5, -1, -std::sqrt(2.0), 0});
}

TEST(StreamingLlm, KvpressZeroOnePatternKeepsSinksAndRecent) {
  auto o = zero_layer(1, 1, 10, 2);
  const StreamingLlmScorer s(4);
  // cr 0.5: n_kept = 5, n_pruned = 5 → zeros on [4, 9).
  expect_near(scores_of(s, o), {1, 1, 1, 1, 0, 0, 0, 0, 0, 1});
  const auto sel = ScorerMethod(std::make_shared<StreamingLlmScorer>(4))
                       .select(std::vector{o.view()}, Budget{.compression = 0.5}, {});
  EXPECT_EQ(sel.kept[0][0], (std::vector<std::int32_t>{0, 1, 2, 3, 9}));
  // Without a budget the ranking is the same for any n_kept ≥ n_sink.
  std::vector<float> plain(10);
  s.score(o.view(), {}, plain);
  EXPECT_EQ(top_k_positions(plain, 6), (std::vector<std::int32_t>{0, 1, 2, 3, 8, 9}));
  auto short_layer = zero_layer(1, 1, 4, 2);
  EXPECT_THROW(scores_of(s, short_layer), std::invalid_argument);
}

// One query head, d = 2, L = 4, window 1: q = (√2, 0) at position 3 gives logits k_j[0]·√2/√2 =
// k_j[0] = ln(1, 2, 3, 2), so A = (1, 2, 3, 2)/8.
OwnedLayer attention_layer() {
  auto o = zero_layer(1, 1, 4, 2);
  o.keys[0] = {0, 0, std::log(2.0f), 0, std::log(3.0f), 0, std::log(2.0f), 0};
  o.window_rows = 1;
  o.window_queries = {std::sqrt(2.0f), 0};
  return o;
}

TEST(SnapKv, KvpressMeanAvgPoolCountIncludePadWindowMaxPlusOne) {
  const SnapKvScorer s(
      {.variant = SnapKvVariant::kvpress, .window = 1, .kernel_size = 3, .pooling = Pooling::avg});
  // Columns 0..2 = 0.125, 0.25, 0.375; pool k=3 with zero padding counted: 0.375/3, 0.75/3,
  // 0.625/3; window position 3 = max + 1.
  const double p2 = 0.625 / 3;
  expect_near(scores_of(s, attention_layer()), {0.125, 0.25, p2, 1.25});
}

TEST(SnapKv, OriginalSumsWindowThenMaxPools) {
  const SnapKvScorer s(
      {.variant = SnapKvVariant::original, .window = 1, .kernel_size = 3, .pooling = Pooling::max});
  expect_near(scores_of(s, attention_layer()), {0.25, 0.375, 0.375, 1.375});
}

TEST(SnapKv, GroupMeanAfterPoolingAndCausalWindow) {
  // Two query heads on one KV head, window 2 over L = 3: row 0 (position 1) sees keys 0..1 only.
  auto o = zero_layer(1, 2, 3, 2);
  o.keys[0] = {0, 0, std::log(3.0f), 0, 0, 0};
  o.window_rows = 2;
  // head 0: q = (√2, 0) → logits (0, ln3, 0); head 1: q = 0 → uniform.
  o.window_queries = {std::sqrt(2.0f), 0, std::sqrt(2.0f), 0, 0, 0, 0, 0};
  const SnapKvScorer s(
      {.variant = SnapKvVariant::kvpress, .window = 2, .kernel_size = 1, .pooling = Pooling::avg});
  // Column 0: head 0 rows: 1/4 (row 0 over keys 0,1), 1/5 (row 1); head 1: 1/2, 1/3.
  const double h0 = (0.25 + 0.2) / 2, h1 = (0.5 + 1.0 / 3) / 2;
  const double c0 = (h0 + h1) / 2;
  expect_near(scores_of(s, o), {c0, c0 + 1, c0 + 1});
  EXPECT_EQ(s.window_needed(), 2);
}

TEST(SnapKv, RejectsWindowNotShorterThanContext) {
  const SnapKvScorer s({.window = 4, .kernel_size = 5});
  auto o = attention_layer();
  EXPECT_THROW(scores_of(s, o), std::invalid_argument);
}

TEST(Tova, KvpressMeanOverAllHeadsLastTokenProtected) {
  auto o = zero_layer(2, 2, 4, 2);  // 2 KV heads, 1 query head each
  o.keys[0] = attention_layer().keys[0];
  o.window_rows = 1;
  o.window_queries = {std::sqrt(2.0f), 0, 0, 0};  // head 0: (1,2,3,2)/8; head 1: uniform 1/4
  const double a0 = (0.125 + 0.25) / 2, a1 = (0.25 + 0.25) / 2, a2 = (0.375 + 0.25) / 2;
  const double top = a2 + 1;
  expect_near(scores_of(TovaScorer(TovaVariant::kvpress), o), {a0, a1, a2, top, a0, a1, a2, top});
  const double a3 = (0.25 + 0.25) / 2;
  expect_near(scores_of(TovaScorer(TovaVariant::original), o), {a0, a1, a2, a3, a0, a1, a2, a3});
}

TEST(ObservedAttention, ColumnSumOverVisibleQueriesThenGroupMean) {
  auto o = zero_layer(1, 2, 3, 2);
  o.column_sums = {1.5, 1.0, 0.5,   // head 0
                   2.1, 0.6, 0.3};  // head 1
  expect_near(scores_of(ObservedAttentionScorer{}, o),
              {(1.5 / 3 + 2.1 / 3) / 2, (1.0 / 2 + 0.6 / 2) / 2, (0.5 + 0.3) / 2});
}

TEST(ExpectedAttention, AveragedRopeIsTheMeanRotation) {
  const std::vector<float> inv_freq = {0.5f};
  const auto r = averaged_rope_rotation(inv_freq, 3, 2);  // positions 3, 4
  const double c = (std::cos(1.5) + std::cos(2.0)) / 2, s = (std::sin(1.5) + std::sin(2.0)) / 2;
  EXPECT_NEAR(r[0], c, 1e-6);
  EXPECT_NEAR(r[1], -s, 1e-6);
  EXPECT_NEAR(r[2], s, 1e-6);
  EXPECT_NEAR(r[3], c, 1e-6);
}

OwnedLayer ea_layer() {
  auto o = zero_layer(1, 1, 3, 2);
  o.moments_first_row = 1;  // n_sink = 1: rows 1, 2 are queries (1, 1) and (1, −1)
  o.query_count = 2;
  o.query_sum = {2, 0};
  o.query_outer = {2, 0, 0, 2};  // μ = (1, 0), Σ = diag(0, 1)
  o.rope_inv_freq = {0.0f};      // R̄ = I
  o.keys[0] = {9, 9, 0, 2, std::sqrt(2.0f), 0};
  o.values[0] = {1, 0, 2, 0, 0, 1};
  return o;
}

TEST(ExpectedAttention, MeanAndCovarianceTermsSoftmaxVnormSinks) {
  // Key 1 = (0, 2): z = 0 + kᵀΣk/(2d) = 4/4 = 1; key 2 = (√2, 0): z = √2/√2 = 1 → a = ½, ½;
  // ×‖v‖ = 2, 1 → 1, 0.5; the sink gets max + 1 = 2.
  const ExpectedAttentionScorer s({.n_future_positions = 4, .n_sink = 1});
  expect_near(scores_of(s, ea_layer()), {2, 1, 0.5});
  // Without the covariance: z = 0, 1 → softmax (1, e)/(1+e); ε = 0.5 before the value norm.
  const ExpectedAttentionScorer t(
      {.n_future_positions = 4, .n_sink = 1, .use_covariance = false, .epsilon = 0.5});
  const double e = std::exp(1.0);
  const double s1 = (1 / (1 + e) + 0.5) * 2, s2 = (e / (1 + e) + 0.5) * 1;
  expect_near(scores_of(t, ea_layer()), {std::max(s1, s2) + 1, s1, s2}, 1e-5);
}

TEST(ExpectedAttention, RejectsMomentsFromOtherRows) {
  const ExpectedAttentionScorer s({.n_sink = 4});
  EXPECT_THROW(scores_of(s, ea_layer()), std::invalid_argument);
}

TEST(KeyDiff, NegativeCosineToMeanNormalisedKey) {
  auto o = zero_layer(1, 1, 3, 2);
  o.keys[0] = {2, 0, 1, 0, 0, 3};  // normalised: (1,0), (1,0), (0,1); anchor (2/3, 1/3)
  const double n = std::sqrt(5.0) / 3;
  expect_near(scores_of(KeyDiffScorer{}, o), {-(2.0 / 3) / n, -(2.0 / 3) / n, -(1.0 / 3) / n});
}

TEST(KeyDiff, BlockVariantReanchorsOverKeptAndBlock) {
  auto o = zero_layer(1, 1, 4, 2);
  o.keys[0] = {1, 0, 1, 0.1f, 0, 1, 1, 0};
  // n_kept = 2: start {0,1}; block {2}: key 1 is closer to the anchor than key 0 → {0,2};
  // block {3}: keys 0 and 3 tie → the lower position → {0,2}.
  const auto sel = BlockKeyDiffMethod(1).select(std::vector{o.view()}, {.compression = 0.5}, {});
  EXPECT_EQ(sel.kept[0][0], (std::vector<std::int32_t>{0, 2}));
  // One block covering everything is the one-shot scorer.
  const auto one = BlockKeyDiffMethod(128).select(std::vector{o.view()}, {.compression = 0.5}, {});
  const auto shot = ScorerMethod(std::make_shared<KeyDiffScorer>())
                        .select(std::vector{o.view()}, {.compression = 0.5}, {});
  EXPECT_EQ(one.kept, shot.kept);
}

TEST(Random, DeterministicPerCellAndUniform) {
  auto o = zero_layer(2, 2, 4000, 2);
  const RandomScorer s;
  std::vector<float> a(8000), b(8000), c(8000);
  s.score(o.view(), {.seed = 7, .cell_key = 11}, a);
  s.score(o.view(), {.seed = 7, .cell_key = 11}, b);
  s.score(o.view(), {.seed = 7, .cell_key = 12}, c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double mean = 0;
  for (const float x : a) {
    ASSERT_GE(x, 0.0f);
    ASSERT_LT(x, 1.0f);
    mean += x;
  }
  mean /= 8000;
  EXPECT_NEAR(mean, 0.5, 0.02);  // sd of the mean ≈ 0.0032
  // The two heads draw different streams.
  EXPECT_FALSE(std::equal(a.begin(), a.begin() + 4000, a.begin() + 4000));
}

TEST(ScorerMethod, PerHeadTopKWithKvpressBudget) {
  auto o = zero_layer(2, 2, 5, 2);
  o.keys[0] = {5, 0, 1, 0, 4, 0, 2, 0, 3, 0};  // norms 5,1,4,2,3 → keep lowest norms
  o.keys[1] = {1, 0, 2, 0, 3, 0, 4, 0, 5, 0};
  const auto sel = ScorerMethod(std::make_shared<KnormScorer>())
                       .select(std::vector{o.view()}, {.compression = 0.4}, {});
  ASSERT_EQ(sel.kept.size(), 1u);
  EXPECT_EQ(sel.kept[0][0], (std::vector<std::int32_t>{1, 3, 4}));
  EXPECT_EQ(sel.kept[0][1], (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(sel.kept_entries(), 6);
}

TEST(Capture, MalformedCapturesAreRejected) {
  auto o = zero_layer(1, 1, 3, 2);
  o.keys[0].pop_back();
  EXPECT_THROW(scores_of(KnormScorer{}, o), std::invalid_argument);
  auto p = zero_layer(1, 1, 3, 2);
  EXPECT_THROW(scores_of(ObservedAttentionScorer{}, p), std::invalid_argument);  // no column sums
  EXPECT_THROW(ScorerMethod(std::make_shared<KnormScorer>()).select({}, {}, {}),
               std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::methods
