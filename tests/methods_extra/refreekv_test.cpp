// ReFreeKV (methods/refreekv.h) on a constructed case where j* is computable by hand for every T of
// the study's sweep; prints the realised-retention table.
#include "methods/refreekv.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "tests/methods_extra/capture_builder.h"

namespace kvaudit::methods {
namespace {

using testing::CaptureBuilder;

constexpr int kWindow = 8;
constexpr int kPrefix = 15;
constexpr int kLength = kPrefix + kWindow;  // 23
const std::vector<double> kThresholds = {0.0005, 0.001, 0.002, 0.003, 0.005,
                                         0.0075, 0.01,  0.015, 0.02,  0.03};

// H = 2 query heads on one KV head, d = 4, L = 23, w = 8. Every window row of both heads is the
// query 2·e_0 and key j has component 0 = ln(a_j) with
//   a = [S, 7 3 12 1 9 14 5 2 11 6 13 4 10 8 | 1 1 1 1 1 1 1 1]   (positions 0..14 | window)
// so each row's attention is a_j / Σ_visible a. The ranking Σ_rows A(i, j) is a_j·Σ_i 1/S_i: the
// prefix ranks by a_j (weights 1, 2, 3, ... are evicted first). The criterion (last row) is
// a_j / Σ_all a; the normalisation cancels in the ratio, so with E = S² + Σ_{t=1..14} t² = S² +
// 1015 and R_j = Σ_{t=1..j} t² (the j smallest removed):
//   ratio_j = 1 − sqrt(1 − R_j / E).
// Layer 0, S = 104 (E = 11831): ratio_1..13 = .000042 .000211 .000592 .001269 .002327 .003853
//   .005934 .008659 .012118 .016405 .021618 .027858 .035233
//   → j* (largest j with ratio_j ≤ T) = 2 3 4 5 6 7 8 9 10 12 for the ten T.
// Layer 1, S = 26 (E = 1691): ratio_1..7 = .000296 .001480 .004148 .008910 .016397 .027279 .042290
//   → j* = 1 1 2 2 3 3 4 4 5 6.
// Both heads are identical, so the mean over query heads changes nothing.
CaptureBuilder refree_layer(double sink) {
  CaptureBuilder b(/*H=*/2, /*Hkv=*/1, /*d=*/4, kLength, /*rows=*/kWindow, /*D=*/2);
  std::vector<double> weights = {sink, 7, 3, 12, 1, 9, 14, 5, 2, 11, 6, 13, 4, 10, 8};
  weights.resize(kLength, 1.0);
  b.set_key_weights(0, 0, weights);
  for (int h = 0; h < 2; ++h)
    for (int row = 0; row < kWindow; ++row) b.set_query_component(h, row, 0);
  return b;
}

struct TwoLayerRequest {
  CaptureBuilder layer0 = refree_layer(104);
  CaptureBuilder layer1 = refree_layer(26);
  std::vector<LayerCapture> views() const { return {layer0.view(0, 2), layer1.view(1, 2)}; }
};

TEST(ReFreeKv, LossRatiosMatchTheClosedForm) {
  const auto builder = refree_layer(104);
  const auto cut = refreekv_layer_cut(builder.view(), kWindow, 0.01);
  ASSERT_EQ(cut.loss_ratio.size(), static_cast<std::size_t>(kPrefix));
  const double energy = 104.0 * 104.0 + 1015.0;
  double removed = 0.0;
  for (int j = 0; j < kPrefix; ++j) {
    EXPECT_NEAR(cut.loss_ratio[static_cast<std::size_t>(j)],
                1.0 - std::sqrt(1.0 - removed / energy), 1e-6)
        << "j=" << j;
    removed += static_cast<double>(j + 1) * (j + 1);
  }
  // T = .01: ratio_8 = .008659 ≤ .01 < ratio_9 = .012118 → j* = 8: weights 1..8 go (positions
  // 4 8 2 12 7 10 1 14), the same 15 − 8 = 7 prefix tokens stay in every head, plus the window.
  EXPECT_EQ(cut.cut, 8);
  EXPECT_EQ(cut.kept_per_head, kPrefix - 8 + kWindow);
  const std::vector<std::int32_t> expected = {0,  3,  5,  6,  9,  11, 13, 15,
                                              16, 17, 18, 19, 20, 21, 22};
  ASSERT_EQ(cut.kept.size(), 1u);
  EXPECT_EQ(cut.kept[0], expected);
}

TEST(ReFreeKv, RealisedRetentionOverTheThresholdSweep) {
  const TwoLayerRequest request;
  const auto layers = request.views();
  const ReFreeKvMethod method(kWindow);
  const std::vector<std::int64_t> cut0 = {2, 3, 4, 5, 6, 7, 8, 9, 10, 12};
  const std::vector<std::int64_t> cut1 = {1, 1, 2, 2, 3, 3, 4, 4, 5, 6};
  std::printf("ReFreeKV realised retention (L = %d, w = %d, 2 layers)\n", kLength, kWindow);
  std::printf("%8s %6s %6s %10s\n", "T", "j*_0", "j*_1", "retention");
  double previous = 2.0;
  for (std::size_t t = 0; t < kThresholds.size(); ++t) {
    const auto outcome = method.select_with_retention(layers, kThresholds[t]);
    ASSERT_EQ(outcome.cut_per_layer.size(), 2u);
    EXPECT_EQ(outcome.cut_per_layer[0], cut0[t]) << "T=" << kThresholds[t];
    EXPECT_EQ(outcome.cut_per_layer[1], cut1[t]) << "T=" << kThresholds[t];
    // retention = mean over layers of (P − j* + w)/L = (2·23 − j*_0 − j*_1) / 46.
    const double expected = static_cast<double>(2 * kLength - cut0[t] - cut1[t]) / (2.0 * kLength);
    EXPECT_DOUBLE_EQ(outcome.realised_retention, expected);
    std::printf("%8.4f %6lld %6lld %10.6f\n", kThresholds[t],
                static_cast<long long>(outcome.cut_per_layer[0]),
                static_cast<long long>(outcome.cut_per_layer[1]), outcome.realised_retention);
    // Invariants: retention never grows with T; the window is always kept; at least one prefix
    // token survives; every head keeps the same count.
    EXPECT_LE(outcome.realised_retention, previous);
    previous = outcome.realised_retention;
    for (const auto& layer : outcome.selection.kept)
      for (const auto& head : layer) {
        ASSERT_GE(head.size(), static_cast<std::size_t>(kWindow + 1));
        for (int i = 0; i < kWindow; ++i)
          EXPECT_EQ(head[head.size() - kWindow + static_cast<std::size_t>(i)], kPrefix + i);
        EXPECT_LT(head.front(), kPrefix);
        EXPECT_EQ(head.size(), layer.front().size());
      }
  }
  // Through select(): the same kept sets as select_with_retention.
  EXPECT_EQ(method.select(layers, {.threshold = 0.01}, {}).kept,
            method.select_with_retention(layers, 0.01).selection.kept);
}

TEST(ReFreeKv, ExtremeThresholds) {
  const TwoLayerRequest request;
  const auto layers = request.views();
  const ReFreeKvMethod method(kWindow);
  // T = 0: only j = 0 qualifies (ratio_0 = 0 exactly) → everything kept.
  EXPECT_DOUBLE_EQ(method.select_with_retention(layers, 0.0).realised_retention, 1.0);
  // T = 1: every j qualifies; the largest is P − 1, so exactly one prefix token (the sink)
  // survives.
  const auto all_but_one = method.select_with_retention(layers, 1.0);
  EXPECT_EQ(all_but_one.cut_per_layer, (std::vector<std::int64_t>{kPrefix - 1, kPrefix - 1}));
  EXPECT_EQ(all_but_one.selection.kept[0][0].front(), 0);
  EXPECT_EQ(all_but_one.selection.kept[0][0].size(), static_cast<std::size_t>(kWindow + 1));
  EXPECT_DOUBLE_EQ(all_but_one.realised_retention, (kWindow + 1.0) / kLength);
}

// GQA: two query heads with different rows on one KV head, L = 6, w = 2, P = 4.
//   head 0 (component 0): a = [4 1 2 3 | 1 1], head 1 (component 1): a = [1 6 1 1 | 1 1].
// Row 0 (position 4) sees keys 0..4, row 1 all six: head 0 rows give a_j/11 and a_j/12, head 1 rows
// a_j/10 and a_j/11. Ranking = Σ over both heads and rows: r = 4·c0 + c1, c0 + 6·c1, 2·c0 + c1,
// 3·c0 + c1 with c0 = 1/11 + 1/12, c1 = 1/10 + 1/11: r = [.888 1.320 .539 .714] → ascending j2 j3
// j0 j1 (head 0 alone would put j1 first to go).
// Criterion (last rows, window zeroed, not renormalised): head 0 [4 1 2 3]/12, head 1 [1 6 1 1]/11.
// ‖·‖: head 0 sqrt(30)/12 = .45644, head 1 sqrt(39)/11 = .56773, base = .51208.
// Without j2: sqrt(26)/12 = .42492, sqrt(38)/11 = .56040 → ρ_1 = .49266, ratio_1 = .03793.
// Without j2, j3: sqrt(17)/12 = .34359, sqrt(37)/11 = .55298 → ratio_2 = .12458.
TEST(ReFreeKv, GqaRankingSumsTheGroupAndCriterionAveragesHeads) {
  CaptureBuilder b(/*H=*/2, /*Hkv=*/1, /*d=*/4, /*L=*/6, /*rows=*/2, /*D=*/2);
  b.set_key_weights(0, 0, {4, 1, 2, 3, 1, 1});
  b.set_key_weights(0, 1, {1, 6, 1, 1, 1, 1});
  for (int row = 0; row < 2; ++row) {
    b.set_query_component(0, row, 0);
    b.set_query_component(1, row, 1);
  }
  const auto cut = refreekv_layer_cut(b.view(), 2, 0.05);
  EXPECT_NEAR(cut.loss_ratio[0], 0.0, 1e-12);
  EXPECT_NEAR(cut.loss_ratio[1],
              1.0 - (std::sqrt(26.0) / 12 + std::sqrt(38.0) / 11) /
                        (std::sqrt(30.0) / 12 + std::sqrt(39.0) / 11),
              1e-6);
  EXPECT_NEAR(cut.loss_ratio[2],
              1.0 - (std::sqrt(17.0) / 12 + std::sqrt(37.0) / 11) /
                        (std::sqrt(30.0) / 12 + std::sqrt(39.0) / 11),
              1e-6);
  EXPECT_EQ(cut.cut, 1);  // .0379 ≤ .05 < .1246
  EXPECT_EQ(cut.kept[0], (std::vector<std::int32_t>{0, 1, 3, 4, 5}));
}

}  // namespace
}  // namespace kvaudit::methods
