// Finch (methods/finch.h): hand-computed scores with and without kvpress's position weighting, the
// group mean, the window as the question (SelectionContext::question_tokens) and the
// query-agnostic fallback window, the chunk rule (each chunk keeps its own share; kvpress's
// chunk_length > window / (1 − cr) requirement), edge cases (L ≤ window, budget 1, ties of the
// protected window), and the factory / catalogue ranges.
#include "methods/finch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/method_factory.h"
#include "methods/scorer_method.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

using testing::OwnedLayer;
using testing::zero_layer;

void expect_near(const std::vector<float>& got, const std::vector<double>& want,
                 double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "index " << i;
}

// L = 4, d = 2, one KV head; the question is positions 2 and 3 (two window rows).
// Keys: k0 = (ln 4, 0), k1 = (0, ln 4), k2 = k3 = 0. Query head 0: row 0 (position 2) q = (√2, 0),
// row 1 (position 3) q = (0, √2), so the logits are q·k/√2 = k[0] and k[1]:
//   row 0 sees keys 0..2, exps (4, 1, 1):    A = (2/3, 1/6, 1/6)
//   row 1 sees keys 0..3, exps (1, 4, 1, 1): A = (1/7, 4/7, 1/7, 1/7)
// A second query head (when query_heads = 2) has q = 0: uniform rows (1/3 each; 1/4 each).
OwnedLayer question_layer(int query_heads = 1) {
  auto o = zero_layer(1, query_heads, 4, 2);
  const float ln4 = std::log(4.0f);
  o.keys[0] = {ln4, 0, 0, ln4, 0, 0, 0, 0};
  o.window_rows = 2;
  const float r2 = std::sqrt(2.0f);
  o.window_queries = {r2, 0, 0, r2};
  if (query_heads == 2) o.window_queries.insert(o.window_queries.end(), {0, 0, 0, 0});
  return o;
}

std::vector<float> finch_scores(const FinchParams& params, const OwnedLayer& o,
                                int question_tokens) {
  SelectionContext context;
  context.question_tokens = question_tokens;
  return score_layer(FinchScorer(params), o.view(), Budget{.compression = 0.25}, context);
}

Selection finch_select(const FinchParams& params, const OwnedLayer& o, double cr,
                       int question_tokens) {
  SelectionContext context;
  context.question_tokens = question_tokens;
  return FinchMethod(params).select(std::vector{o.view()}, Budget{.compression = cr}, context);
}

TEST(Finch, NormalizedScoresWeightRowsByPosition) {
  // Rows at positions 2 and 3 weighted by 2 and 3, then averaged over the 2 rows:
  //   s(0) = (2·2/3 + 3·1/7) / 2 = (28/21 + 9/21) / 2 = 37/42
  //   s(1) = (2·1/6 + 3·4/7) / 2 = (7/21 + 36/21) / 2 = 43/42
  // The window (the question, positions 2, 3) gets max + 1 = 85/42.
  expect_near(finch_scores({.window = 64}, question_layer(), 2),
              {37.0 / 42, 43.0 / 42, 85.0 / 42, 85.0 / 42});
}

TEST(Finch, UnnormalizedScoresAreTheWindowMean) {
  //   s(0) = (2/3 + 1/7) / 2 = 17/42,  s(1) = (1/6 + 4/7) / 2 = 31/84; window = 17/42 + 1 = 59/42.
  expect_near(finch_scores({.window = 64, .normalize_scores = false}, question_layer(), 2),
              {17.0 / 42, 31.0 / 84, 59.0 / 42, 59.0 / 42});
}

TEST(Finch, NormalizationChangesWhichCandidateIsKept) {
  // cr 0.25: n_kept = floor(4·0.75) = 3 = the two window positions + the best candidate.
  EXPECT_EQ(finch_select({.window = 64}, question_layer(), 0.25, 2).kept[0][0],
            (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(
      finch_select({.window = 64, .normalize_scores = false}, question_layer(), 0.25, 2).kept[0][0],
      (std::vector<std::int32_t>{0, 2, 3}));
}

TEST(Finch, GroupMeanOverQueryHeads) {
  // Head 1 (uniform rows): s(0) = s(1) = (2·1/3 + 3·1/4) / 2 = 17/24.
  const double s0 = (37.0 / 42 + 17.0 / 24) / 2, s1 = (43.0 / 42 + 17.0 / 24) / 2;
  expect_near(finch_scores({.window = 64}, question_layer(2), 2), {s0, s1, s1 + 1, s1 + 1});
}

TEST(Finch, QueryAgnosticFallsBackToTheLastWindowPositions) {
  // No question in the view: the window is the last `window` = 1 position (row 1 only, at
  // position 3, weighted by 3): s = 3·(1/7, 4/7, 1/7) = (3/7, 12/7, 3/7); position 3 = 19/7.
  expect_near(finch_scores({.window = 1}, question_layer(), 0),
              {3.0 / 7, 12.0 / 7, 3.0 / 7, 19.0 / 7});
  // With window 2 and no question it is exactly Finch with a 2-token question.
  EXPECT_EQ(finch_scores({.window = 2}, question_layer(), 0),
            finch_scores({.window = 64}, question_layer(), 2));
  // The question, when there is one, wins over the parameter.
  EXPECT_EQ(finch_scores({.window = 1}, question_layer(), 2),
            finch_scores({.window = 64}, question_layer(), 2));
}

TEST(Finch, WindowRowsCoverTheQuestionAndTheFallback) {
  const FinchMethod method({.window = 8});
  EXPECT_EQ(method.window_needed(), 8);
  EXPECT_EQ(method.window_rows_needed(0), 8);
  EXPECT_EQ(method.window_rows_needed(20), 20);
  EXPECT_EQ(method.window_rows_needed(3), 8);
}

TEST(Finch, ChunksKeepTheirOwnShare) {
  // L = 10, chunks [0,4), [4,8), [8,10); cr 0.5 keeps max(1, floor(n/2)) = 2, 2, 1 of them.
  const std::vector<float> scores = {5, 1, 4, 2, /**/ 0, 9, 8, 7, /**/ 3, 6};
  EXPECT_EQ(chunked_top_k(scores, 1, 10, 4, 0.5)[0], (std::vector<std::int32_t>{0, 2, 5, 6, 9}));
  // One chunk (chunk_length 0, or ≥ L): the plain top-5.
  const std::vector<std::int32_t> plain = {0, 5, 6, 7, 9};
  EXPECT_EQ(chunked_top_k(scores, 1, 10, 0, 0.5)[0], plain);
  EXPECT_EQ(chunked_top_k(scores, 1, 10, 10, 0.5)[0], plain);
  // A total above n_kept: chunks of 3 at cr 0.5 keep 1 + 1 + 1 + 1 = 4 = floor(10·0.5) − 1, and
  // at cr 0.25 keep 2 + 2 + 2 + 1 = 7 = floor(7.5).
  EXPECT_EQ(chunked_top_k(scores, 1, 10, 3, 0.5)[0].size(), 4u);
  EXPECT_EQ(chunked_top_k(scores, 1, 10, 3, 0.25)[0].size(), 7u);
  // Two heads are chunked independently.
  std::vector<float> two = scores;
  two.insert(two.end(), {0, 0, 0, 1, 1, 0, 0, 0, 0, 1});
  const auto kept = chunked_top_k(two, 2, 10, 4, 0.5);
  EXPECT_EQ(kept[1].size(), 5u);
  EXPECT_EQ(kept[1][1], 3);
  EXPECT_EQ(kept[1][2], 4);
  EXPECT_EQ(kept[1][4], 9);
}

TEST(Finch, ChunkedSelectionRequiresTheWindowToFit) {
  // w = 2 at cr 0.5: kvpress requires chunk_length > 2 / 0.5 = 4.
  EXPECT_THROW(finch_select({.window = 64, .chunk_length = 4}, question_layer(), 0.5, 2),
               std::invalid_argument);
  // chunk 5 ≥ L = 4: one chunk, the plain selection (n_kept 2 = the window).
  EXPECT_EQ(finch_select({.window = 64, .chunk_length = 5}, question_layer(), 0.5, 2).kept[0][0],
            (std::vector<std::int32_t>{2, 3}));
  // cr 0: nothing is compressed and kvpress does not check.
  EXPECT_EQ(finch_select({.window = 64, .chunk_length = 1}, question_layer(), 0.0, 2).kept[0][0],
            (std::vector<std::int32_t>{0, 1, 2, 3}));
}

TEST(Finch, EdgeCases) {
  // Budget 1 (cr 0.9: max(1, floor(0.4)) = 1): one of the two tied window positions.
  const auto one = finch_select({.window = 64}, question_layer(), 0.9, 2).kept[0][0];
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0] == 2 || one[0] == 3);
  // The question (or the fallback window) must leave a candidate: L ≤ window throws.
  EXPECT_THROW(finch_select({.window = 64}, question_layer(), 0.5, 4), std::invalid_argument);
  EXPECT_THROW(finch_select({.window = 4}, question_layer(), 0.5, 0), std::invalid_argument);
  // More question rows than the capture kept.
  auto short_capture = question_layer();
  short_capture.window_rows = 1;
  short_capture.window_queries = {0, std::sqrt(2.0f)};
  EXPECT_THROW(finch_select({.window = 64}, short_capture, 0.5, 2), std::invalid_argument);
  EXPECT_THROW(finch_select({.window = 64}, question_layer(), 0.5, -1), std::invalid_argument);
  EXPECT_THROW(FinchMethod({.window = 0}), std::invalid_argument);
  EXPECT_THROW(FinchMethod({.window = 4, .chunk_length = -1}), std::invalid_argument);
}

MethodConfig finch_config(std::map<std::string, ParamValue> params) {
  return MethodConfig{"f", "finch", "", std::move(params)};
}

TEST(Finch, FactoryRecordsParametersAndRefusesBadValues) {
  const auto method = make_method(finch_config({}));
  const auto& p = std::get<FinchParams>(method->parameters());
  EXPECT_EQ(p.window, 64);
  EXPECT_EQ(p.chunk_length, 0);
  EXPECT_TRUE(p.normalize_scores);
  EXPECT_TRUE(p.rerotate_keys);  // the unit runner re-rotates the kept keys (unit_runner.cpp)
  EXPECT_EQ(method->name(), "finch");
  const auto tuned = make_method(finch_config({{"window", std::int64_t{16}},
                                               {"chunk_length", std::int64_t{96}},
                                               {"rerotate_keys", false}}));
  EXPECT_EQ(tuned->window_needed(), 16);
  EXPECT_EQ(std::get<FinchParams>(tuned->parameters()).chunk_length, 96);
  EXPECT_FALSE(std::get<FinchParams>(tuned->parameters()).rerotate_keys);
  // Catalogue ranges (the manifest checks the same at plan time).
  EXPECT_THROW(make_method(finch_config({{"window", std::int64_t{0}}})), std::invalid_argument);
  EXPECT_THROW(make_method(finch_config({{"chunk_length", std::int64_t{-1}}})),
               std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::methods
