// Budget arithmetic and selection helpers: kept_count (floor in double, min 1), the top-k
// tie-break, max+1 protection, PyramidKV's banker's-rounded layer budgets.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "methods/method.h"
#include "methods/pyramidkv.h"
#include "methods/top_k.h"

namespace kvaudit::methods {
namespace {

TEST(KeptCount, FloorInDoubleAsPythonInt) {
  EXPECT_EQ(kept_count(10, 0.25), 7);    // 7.5
  EXPECT_EQ(kept_count(100, 0.42), 58);  // 58.00000000000001
  EXPECT_EQ(kept_count(7, 0.7), 2);      // 2.1000000000000005
  EXPECT_EQ(kept_count(10, 0.3), 7);     // 1 − 0.3 = 0.7 exactly enough: 7.0
  EXPECT_EQ(kept_count(100, 0.0), 100);
}

TEST(KeptCount, AtLeastOne) {
  EXPECT_EQ(kept_count(3, 0.9), 1);  // floor(0.3) = 0 → 1 (kvpress PR #264)
  EXPECT_EQ(kept_count(1, 0.5), 1);
}

TEST(KeptCount, RejectsBadInput) {
  EXPECT_THROW(kept_count(10, 1.0), std::invalid_argument);
  EXPECT_THROW(kept_count(10, -0.1), std::invalid_argument);
  EXPECT_THROW(kept_count(0, 0.5), std::invalid_argument);
  EXPECT_THROW(kept_count(10, std::nan("")), std::invalid_argument);
}

TEST(TopK, AscendingPositionsAndLowerIndexWinsTies) {
  const std::vector<float> s = {1, 2, 2, 0};
  EXPECT_EQ(top_k_positions(s, 2), (std::vector<std::int32_t>{1, 2}));
  const std::vector<float> t = {5, 3, 3, 3};
  EXPECT_EQ(top_k_positions(t, 2), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(top_k_ranked(t, 3), (std::vector<std::int64_t>{0, 1, 2}));
  const std::vector<float> u = {0, 9, 1};
  EXPECT_EQ(top_k_ranked(u, 3), (std::vector<std::int64_t>{1, 2, 0}));
  EXPECT_EQ(top_k_positions(u, 10).size(), 3u);  // k clamped
}

TEST(TopK, NanRanksFirstAsInTorch) {
  const std::vector<float> s = {1, std::nanf(""), 3};
  EXPECT_EQ(top_k_positions(s, 1), (std::vector<std::int32_t>{1}));
}

TEST(TopK, TorchCpuTopkTieOrderIsReproduced) {
  // Outputs of torch 2.15 (CPU) printed by tools/.venv: torch.zeros(100).topk(10).indices and
  // torch.tensor([1.,0,1,0,1,0,1,1,1,0]*10).topk(30).indices.
  const std::vector<float> zeros(100, 0.0f);
  EXPECT_EQ(torch_top_k_ranked(zeros, 10),
            (std::vector<std::int64_t>{69, 63, 64, 65, 66, 67, 68, 72, 74, 73}));
  std::vector<float> pattern;
  for (int r = 0; r < 10; ++r)
    for (const float v : {1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f, 0.0f})
      pattern.push_back(v);
  EXPECT_EQ(
      torch_top_k_ranked(pattern, 30),
      (std::vector<std::int64_t>{80, 56, 77, 54, 57, 74, 64, 66, 67, 68, 72, 70, 62, 52, 50,
                                 78, 48, 47, 46, 44, 82, 42, 40, 84, 38, 37, 36, 34, 86, 76}));
  // The partial_sort branch (k·64 ≤ n): torch.ones(1000).topk(5) → 3, 4, 1, 0, 2: the same SET as
  // ours (heap selection keeps the first k of a tie); the order inside it differs.
  const std::vector<float> ones(1000, 1.0f);
  EXPECT_EQ(torch_top_k_positions(ones, 5), (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(torch_top_k_ranked(ones, 0).empty());
}

TEST(Protect, MaxPlusOneOverTheWholeLayer) {
  // Two heads of length 3, protect position 2 in both: max over unprotected = 7 (head 1).
  std::vector<float> s = {1, 2, 100, 7, 3, -5};
  protect_with_max_plus_one(s, 3, 2, 3);
  EXPECT_EQ(s, (std::vector<float>{1, 2, 8, 7, 3, 8}));
}

TEST(PyramidKv, LayerBudgetsAreAPyramid) {
  // L=100, cr=0.5, w=8, β=20: cap = 58, min = 2.5, max = 97.5 ≥ 92 → max = 92, min = 8;
  // steps = 84/3 = 28.
  const std::vector<std::int64_t> want = {92, 64, 36, 8};
  for (int l = 0; l < 4; ++l) EXPECT_EQ(pyramid_layer_budget(100, 0.5, 8, 20, l, 4), want[l]);
}

TEST(PyramidKv, BankersRounding) {
  // w=9: max = 91, min = 9, steps = 82/4 = 20.5 → 91, 70.5→70, 50, 29.5→30, 9.
  const std::vector<std::int64_t> want = {91, 70, 50, 30, 9};
  for (int l = 0; l < 5; ++l) EXPECT_EQ(pyramid_layer_budget(100, 0.5, 9, 20, l, 5), want[l]);
}

TEST(PyramidKv, FallbackRoundsHalfToEvenAndOneLayerHasNoSteps) {
  // L=10, cr=0.75, w=64: the pyramid is invalid → round(2.5) = 2.
  EXPECT_EQ(pyramid_layer_budget(10, 0.75, 64, 20, 0, 2), 2);
  // L=10, cr=0.95 → round(0.5) = 0 → at least 1 (kvpress 0.5.5).
  EXPECT_EQ(pyramid_layer_budget(10, 0.95, 64, 20, 1, 2), 1);
  EXPECT_EQ(pyramid_layer_budget(100, 0.5, 8, 20, 0, 1), 92);
  EXPECT_THROW(pyramid_layer_budget(100, 0.5, 8, 20, 2, 2), std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::methods
