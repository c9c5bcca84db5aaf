// DefensiveKV on hand-computed captures (methods/defensive_scoring.h, methods/defensivekv.h).
// Every attention value is a ratio of small integers (capture_builder.h); the expected numbers
// below are worked out in the comments from the definitions in defensive_scoring.h.
#include "methods/defensivekv.h"

#include <gtest/gtest.h>

#include <vector>

#include "methods/defensive_scoring.h"
#include "tests/methods_extra/capture_builder.h"

namespace kvaudit::methods {
namespace {

using testing::CaptureBuilder;
using Kept = std::vector<std::vector<std::int32_t>>;

constexpr double kTol = 1e-6;

// One KV head, GQA group 2 (H = 2), d = 4, L = 8, w = 2, so P = 6. Window row 0 is position 6 (sees
// keys 0..6), row 1 is position 7 (sees 0..7). Unnormalised weights a_j per (head, row):
//   (h0, r0) [1 1 1 1 6 1 | 9]      Σ=20  A = [.05 .05 .05 .05 .30 .05 | .45]
//   (h0, r1) [1 1 1 1 1 4 | 6 5]    Σ=20  A = [.05 .05 .05 .05 .05 .20 | .30 .25]
//   (h1, r0) [1 1 7 1 1 1 | 8]      Σ=20  A = [.05 .05 .35 .05 .05 .05 | .40]
//   (h1, r1) [3 1 1 1 1 1 | 1 1]    Σ=10  A = [.30 .10 .10 .10 .10 .10 | .10 .10]
CaptureBuilder one_kv_head_capture() {
  CaptureBuilder b(/*H=*/2, /*Hkv=*/1, /*d=*/4, /*L=*/8, /*rows=*/2, /*D=*/2);
  b.set_key_weights(0, 0, {1, 1, 1, 1, 6, 1, 9, 1});
  b.set_key_weights(0, 1, {1, 1, 1, 1, 1, 4, 6, 5});
  b.set_key_weights(0, 2, {1, 1, 7, 1, 1, 1, 8, 1});
  b.set_key_weights(0, 3, {3, 1, 1, 1, 1, 1, 1, 1});
  b.set_query_component(0, 0, 0);
  b.set_query_component(0, 1, 1);
  b.set_query_component(1, 0, 2);
  b.set_query_component(1, 1, 3);
  // Value norms differ per token, but with a single KV head ν = n/Σ_k n = 1 whatever they are.
  for (int j = 0; j < 8; ++j) b.set_value(0, j, 0, static_cast<float>(j + 1));
  return b;
}

TEST(DefensiveScoring, MaxAggregationAndMeanLiftOnOneKvHead) {
  const auto builder = one_kv_head_capture();
  const auto s = score_defensive_layer(builder.view(), 2, 0.5, "defensivekv");
  // Pooling (kernel 5, zero padding counted) then rescaling to the row's prefix mass:
  //   (h0,r0) raw /5 = [.03 .04 .10 .10 .09 .08] (Σ .44), ×.55/.44 → [.0375 .05 .125 .125 .1125 .1]
  //   (h0,r1) raw /5 = [.03 .04 .05 .08 .07 .06] (Σ .33), ×.45/.33 → [.0409 .0545 .0682 .1091 .0955
  //   .0818] (h1,r0) raw /5 = [.09 .10 .11 .11 .10 .03] (Σ .54), ×.60/.54 → [.1 .1111 .1222 .1222
  //   .1111 .0333] (h1,r1) raw /5 = [.10 .12 .14 .10 .08 .06] (Σ .60), ×.80/.60 → [.1333 .16 .1867
  //   .1333 .1067 .08]
  // m = max over both heads and both rows = [2/15, 4/25, 14/75, 2/15, 9/80, 1/10].
  const std::vector<double> m = {2.0 / 15, 4.0 / 25, 14.0 / 75, 2.0 / 15, 9.0 / 80, 1.0 / 10};
  ASSERT_EQ(s.worst_case.size(), 6u);
  for (std::size_t j = 0; j < 6; ++j) EXPECT_NEAR(s.worst_case[j], m[j], kTol) << "j=" << j;
  // μ = (160 + 192 + 224 + 160 + 135 + 120)/1200 / 6 = 991/7200; tokens below it are lifted.
  const double mu = 991.0 / 7200;
  EXPECT_NEAR(s.head_mean[0], mu, kTol);
  const std::vector<double> lifted = {mu, 4.0 / 25, 14.0 / 75, mu, mu, mu};
  for (std::size_t j = 0; j < 6; ++j) EXPECT_NEAR(s.defensive[j], lifted[j], kTol) << "j=" << j;
  // The lifted tokens tie exactly at μ (max(m, μ) returns μ itself).
  EXPECT_EQ(s.defensive[0], s.defensive[3]);
  EXPECT_EQ(s.defensive[0], s.defensive[5]);
  // One KV head: the value-norm share is 1 for every token, so s' = s.
  for (std::size_t j = 0; j < 6; ++j) EXPECT_FLOAT_EQ(s.value_share[j], 1.0f);
  EXPECT_NEAR(s.protect_value, 14.0 / 75, kTol);
}

TEST(DefensiveScoring, StageOneForcingWindowBiasAndClamp) {
  const auto builder = one_kv_head_capture();
  // Window bias: mass on the w = 2 keys BEFORE the window ([4, 6)), per row .35 .25 .10 .20 → mean
  // b = .225 (the window's own mass would be .45 .55 .40 .20). τ = .9 − .225 = .675.
  // ā (unpooled, summed over the 4 rows) = [.45 .25 .55 .25 .50 .40], Σ = 2.4, so
  // p = [9 5 11 5 10 8]/48. Descending: j2 11, j4 10, j0 9, j5 8 → cumulative 11/48, 21/48, 30/48,
  // 38/48 = .79 ≥ .675 at index 3 → c = 3 tokens before the crossing (j2, j4, j0).
  const auto free = score_defensive_layer(builder.view(), 2, 0.0, "defensivekv");
  EXPECT_NEAR(free.window_bias, 0.225, kTol);
  const std::vector<double> p = {9.0 / 48, 5.0 / 48, 11.0 / 48, 5.0 / 48, 10.0 / 48, 8.0 / 48};
  for (std::size_t j = 0; j < 6; ++j) EXPECT_NEAR(free.mass_share[j], p[j], kTol) << "j=" << j;
  EXPECT_EQ(free.forced_count[0], 3);  // clamp int(6·1 − 2) = 4 does not bind
  // cr = .25: clamp int(6·.75 − 2) = int(2.5) = 2 → j2 and j4 forced to M = 14/75.
  const auto quarter = score_defensive_layer(builder.view(), 2, 0.25, "defensivekv");
  EXPECT_EQ(quarter.forced_count[0], 2);
  const float M = quarter.protect_value;
  const double mu = 991.0 / 7200;
  const std::vector<double> expected = {mu, 4.0 / 25, M, mu, M, mu, M, M};
  for (std::size_t j = 0; j < 8; ++j) EXPECT_NEAR(quarter.scores[j], expected[j], kTol);
  EXPECT_EQ(quarter.scores[4], M);  // forced: exactly M (not M + 1), as the window
  EXPECT_EQ(quarter.scores[6], M);
  EXPECT_EQ(quarter.scores[7], M);
  // cr = .5: clamp int(3 − 2) = 1 → only j2 (already the natural maximum).
  const auto half = score_defensive_layer(builder.view(), 2, 0.5, "defensivekv");
  EXPECT_EQ(half.forced_count[0], 1);
  EXPECT_NEAR(half.scores[4], mu, kTol);
  // cr = .9: int(6·.1 − 2) = int(−1.4) = −1; we clamp at 0 (the original's negative slice is
  // documented as not reproduced) → nothing forced.
  const auto tight = score_defensive_layer(builder.view(), 2, 0.9, "defensivekv");
  EXPECT_EQ(tight.forced_count[0], 0);
}

TEST(DefensiveKvMethod, KeptSetsOnOneKvHead) {
  const auto builder = one_kv_head_capture();
  const std::vector<LayerCapture> layers = {builder.view()};
  const DefensiveKvMethod method(2);
  EXPECT_EQ(method.window_needed(), 2);
  EXPECT_EQ(method.name(), "defensivekv");
  // cr = .25: n_kept = int(8·.75·1) = 6. Scores [μ, .16, M, μ, M, μ, M, M]: the four M entries,
  // .16, then one of the μ ties (j0, j3, j5) → the lower position j0. Without stage 1, j4 (lifted
  // to μ) would have lost that tie to j0 and j3.
  EXPECT_EQ(method.select(layers, {.compression = 0.25}, {}).kept[0], (Kept{{0, 1, 2, 4, 6, 7}}));
  // cr = .5: n_kept = 4: j2 (M, forced), the window (M) and j1 (.16 > μ).
  EXPECT_EQ(method.select(layers, {.compression = 0.5}, {}).kept[0], (Kept{{1, 2, 6, 7}}));
  // cr = 0 keeps everything (the original returns the cache unchanged).
  EXPECT_EQ(method.select(layers, {.compression = 0.0}, {}).kept[0],
            (Kept{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

// Two KV heads (H = 4, G = 2), L = 8, w = 2. All queries are zero, so every row is uniform: row 0
// (position 6) gives 1/7 to keys 0..6, row 1 gives 1/8 to keys 0..7.
// Values V_{k,j} = (f_k(j), 1/2, 0, 0), o_proj for head h: out 0 = α_h·(v0 + v1), out 1 =
// α_h·(v0 − v1), so N_h(j) = α_h(|f + 1/2| + |f − 1/2|) = 2·α_h·f (an L1 norm; L2 would differ).
// α = [1, 3 | 2, 2]: the group MEAN is 2 for both KV heads (the max would be 3 vs 2).
// f_0 = [1 1 2 3 1 1], f_1 = [1 3 1 1 1 1] → ν_0 = f_0/(f_0 + f_1) = [1/2 1/4 2/3 3/4 1/2 1/2].
CaptureBuilder two_kv_head_capture(const std::vector<float>& f0, const std::vector<float>& f1) {
  CaptureBuilder b(/*H=*/4, /*Hkv=*/2, /*d=*/4, /*L=*/8, /*rows=*/2, /*D=*/2);
  for (int k = 0; k < 2; ++k) std::fill(b.values(k).begin(), b.values(k).end(), 0.0f);
  for (int j = 0; j < 6; ++j) {
    b.set_value(0, j, 0, f0[static_cast<std::size_t>(j)]);
    b.set_value(1, j, 0, f1[static_cast<std::size_t>(j)]);
    b.set_value(0, j, 1, 0.5f);
    b.set_value(1, j, 1, 0.5f);
  }
  std::fill(b.o_proj().begin(), b.o_proj().end(), 0.0f);
  const float alpha[4] = {1, 3, 2, 2};
  for (int h = 0; h < 4; ++h) {
    b.set_o_proj(0, h * 4 + 0, alpha[h]);
    b.set_o_proj(0, h * 4 + 1, alpha[h]);
    b.set_o_proj(1, h * 4 + 0, alpha[h]);
    b.set_o_proj(1, h * 4 + 1, -alpha[h]);
  }
  return b;
}

TEST(DefensiveScoring, ValueShareIsNormalisedAcrossKvHeads) {
  const auto builder = two_kv_head_capture({1, 1, 2, 3, 1, 1}, {1, 3, 1, 1, 1, 1});
  const auto s = score_defensive_layer(builder.view(), 2, 0.4375, "defensivekv");
  const std::vector<double> nu0 = {0.5, 0.25, 2.0 / 3, 0.75, 0.5, 0.5};
  for (std::size_t j = 0; j < 6; ++j) {
    EXPECT_NEAR(s.value_share[j], nu0[j], kTol) << "j=" << j;
    EXPECT_NEAR(s.value_share[6 + j], 1.0 - nu0[j], kTol) << "j=" << j;
  }
  // Uniform rows pool to u·[3/4 1 5/4 5/4 1 3/4] (u = 1/7 dominates 1/8), μ = u = 1/7, so
  // s = [1/7 1/7 5/28 5/28 1/7 1/7] for both heads and s' = s·ν:
  //   head 0 [1/14 1/28 5/42 15/112 1/14 1/14], head 1 [1/14 3/28 5/84 5/112 1/14 1/14]; M =
  //   15/112.
  EXPECT_NEAR(s.head_mean[0], 1.0 / 7, kTol);
  EXPECT_NEAR(s.head_mean[1], 1.0 / 7, kTol);
  EXPECT_NEAR(s.protect_value, 15.0 / 112, kTol);
  // Stage 1: b = (2/7 + 2/8)/2 = 15/56, τ = .9 − 15/56 = .632; p = 1/6 each; 4/6 ≥ τ → c = 3,
  // clamped to int(6·.5625 − 2) = 1: the first of the tied tokens, j0, gets M in both heads.
  EXPECT_NEAR(s.window_bias, 15.0 / 56, kTol);
  EXPECT_EQ(s.forced_count, (std::vector<std::int64_t>{1, 1}));
  const float M = s.protect_value;
  const std::vector<double> head0 = {M, 1.0 / 28, 5.0 / 42, M, 1.0 / 14, 1.0 / 14, M, M};
  const std::vector<double> head1 = {M, 3.0 / 28, 5.0 / 84, 5.0 / 112, 1.0 / 14, 1.0 / 14, M, M};
  for (std::size_t j = 0; j < 8; ++j) {
    EXPECT_NEAR(s.scores[j], head0[j], kTol) << "j=" << j;
    EXPECT_NEAR(s.scores[8 + j], head1[j], kTol) << "j=" << j;
  }
}

TEST(DefensiveKvMethod, HeadBudgetsAreAdaptiveWithinALayer) {
  const auto builder = two_kv_head_capture({1, 1, 2, 3, 1, 1}, {1, 3, 1, 1, 1, 1});
  const std::vector<LayerCapture> layers = {builder.view()};
  const DefensiveKvMethod method(2);
  // cr = .4375: n_kept = int(8·.5625·2) = 9 over both heads: the 7 entries at M (head 0: j0 j3 j6
  // j7; head 1: j0 j6 j7), then head 0 j2 (5/42) and head 1 j1 (3/28). Budgets 5 and 4.
  EXPECT_EQ(method.select(layers, {.compression = 0.4375}, {}).kept[0],
            (Kept{{0, 2, 3, 6, 7}, {0, 1, 6, 7}}));
  // cr = .5: n_kept = 8 → head 1 loses j1 (budgets 5 and 3).
  EXPECT_EQ(method.select(layers, {.compression = 0.5}, {}).kept[0],
            (Kept{{0, 2, 3, 6, 7}, {0, 6, 7}}));
}

}  // namespace
}  // namespace kvaudit::methods
