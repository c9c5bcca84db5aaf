// H2O heavy + recent split (methods/h2o.h) on hand-picked column sums.
#include "methods/h2o.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/methods_extra/capture_builder.h"

namespace kvaudit::methods {
namespace {

using testing::CaptureBuilder;
using Kept = std::vector<std::vector<std::int32_t>>;

// H = 2 query heads sharing one KV head, L = 10. The group mean of the column sums is
//   s = [6 1.5 4.5 2.5 5.5 3 .5 2 1 .25]
// while head 0 alone would rank j0 9, j2 6.5, j4 5.5, j5 5, j7 3 (a different order).
CaptureBuilder h2o_capture() {
  CaptureBuilder b(/*H=*/2, /*Hkv=*/1, /*d=*/4, /*L=*/10, /*rows=*/0, /*D=*/2);
  const std::vector<float> head0 = {9, 0.5f, 6.5f, 0.5f, 5.5f, 5, 0.5f, 3, 1, 0.25f};
  const std::vector<float> head1 = {3, 2.5f, 2.5f, 4.5f, 5.5f, 1, 0.5f, 1, 1, 0.25f};
  auto& sums = b.column_sums();
  std::copy(head0.begin(), head0.end(), sums.begin());
  std::copy(head1.begin(), head1.end(), sums.begin() + 10);
  return b;
}

Kept run(double heavy_fraction, double compression) {
  const auto builder = h2o_capture();
  const std::vector<LayerCapture> layers = {builder.view()};
  return H2oMethod(heavy_fraction).select(layers, {.compression = compression}, {}).kept[0];
}

TEST(H2o, SplitArithmetic) {
  // heavy = int(f·r·L), recent = int((1 − f)·r·L), r = 1 − cr.
  EXPECT_EQ(h2o_split(10, 0.6, 0.5).heavy, 2);
  EXPECT_EQ(h2o_split(10, 0.6, 0.5).recent, 2);
  // r·L = 5 is odd: two truncations give 2 + 2 = 4, one below floor(r·L) (the original's
  // arithmetic).
  EXPECT_EQ(h2o_split(10, 0.5, 0.5).heavy, 2);
  EXPECT_EQ(h2o_split(10, 0.5, 0.5).recent, 2);
  EXPECT_EQ(h2o_split(10, 0.5, 0.25).heavy, 1);   // int(1.25)
  EXPECT_EQ(h2o_split(10, 0.5, 0.25).recent, 3);  // int(3.75)
  // Nothing left: the last token is kept.
  EXPECT_EQ(h2o_split(10, 0.95, 0.5).heavy, 0);
  EXPECT_EQ(h2o_split(10, 0.95, 0.5).recent, 1);
}

TEST(H2o, HeavyPlusRecentAtSeveralBudgets) {
  // cr = .6, f = .5: recent {8, 9}; heavy top 2 of s over 0..7 → j0 (6), j4 (5.5).
  EXPECT_EQ(run(0.5, 0.6), (Kept{{0, 4, 8, 9}}));
  // cr = .2, f = .5: recent {6..9}; heavy top 4 over 0..5 → j0 6, j4 5.5, j2 4.5, j5 3.
  EXPECT_EQ(run(0.5, 0.2), (Kept{{0, 2, 4, 5, 6, 7, 8, 9}}));
  // cr = .5, f = .25: recent {7, 8, 9}; heavy top 1 over 0..6 → j0.
  EXPECT_EQ(run(0.25, 0.5), (Kept{{0, 7, 8, 9}}));
  // f = 1: heavy only, over all positions: j0 j4 j2 j5.
  EXPECT_EQ(run(1.0, 0.6), (Kept{{0, 2, 4, 5}}));
  // f = 0: recent only (the last 4).
  EXPECT_EQ(run(0.0, 0.6), (Kept{{6, 7, 8, 9}}));
  // A budget with nothing left keeps the last token.
  EXPECT_EQ(run(0.5, 0.95), (Kept{{9}}));
  // cr = 0 keeps everything.
  EXPECT_EQ(run(0.5, 0.0), (Kept{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}));
}

TEST(H2o, RecentTokensAreNotHeavyCandidates) {
  // A huge column sum inside the recent window does not use a heavy slot.
  auto builder = h2o_capture();
  builder.column_sums()[9] = 100;
  builder.column_sums()[19] = 100;
  const std::vector<LayerCapture> layers = {builder.view()};
  EXPECT_EQ(H2oMethod(0.5).select(layers, {.compression = 0.6}, {}).kept[0], (Kept{{0, 4, 8, 9}}));
}

TEST(H2o, DeclaresItsCaptureNeeds) {
  const H2oMethod method(0.5);
  EXPECT_TRUE(method.needs_column_sums());
  EXPECT_EQ(method.window_needed(), 0);
  EXPECT_EQ(method.name(), "h2o");
}

}  // namespace
}  // namespace kvaudit::methods
