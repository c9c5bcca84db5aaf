// Layer-DefensiveKV on hand-computed captures (methods/layer_defensivekv.h): one budget over all
// layers, layer budgets = how many of the global top N_tot fall in each layer.
#include "methods/layer_defensivekv.h"

#include <gtest/gtest.h>

#include <vector>

#include "methods/defensive_scoring.h"
#include "methods/defensivekv.h"
#include "tests/methods_extra/capture_builder.h"

namespace kvaudit::methods {
namespace {

using testing::CaptureBuilder;
using Kept = std::vector<std::vector<std::int32_t>>;

// Two KV heads (H = 4), L = 8, w = 2, all queries zero (uniform rows: 1/7 then 1/8). Values
// V_{k,j} = (f_k(j), 0, 0, 0) with o_proj = 1 everywhere, so N_h(j) = D·f = 2f and ν_0 =
// f_0/(f_0+f_1). s = [1/7 1/7 5/28 5/28 1/7 1/7] (see defensivekv_test.cpp for the pooling
// arithmetic).
CaptureBuilder uniform_capture(const std::vector<float>& f0, const std::vector<float>& f1) {
  CaptureBuilder b(/*H=*/4, /*Hkv=*/2, /*d=*/4, /*L=*/8, /*rows=*/2, /*D=*/2);
  for (int k = 0; k < 2; ++k) std::fill(b.values(k).begin(), b.values(k).end(), 0.0f);
  for (int j = 0; j < 6; ++j) {
    b.set_value(0, j, 0, f0[static_cast<std::size_t>(j)]);
    b.set_value(1, j, 0, f1[static_cast<std::size_t>(j)]);
  }
  return b;
}

// Layer 0: ν_0 = [1/2 1/4 2/3 3/4 1/2 1/2] → s' head 0 [1/14 1/28 5/42 15/112 1/14 1/14],
//          head 1 [1/14 3/28 5/84 5/112 1/14 1/14], M_0 = 15/112 ≈ .134.
// Layer 1: ν = 1/2 everywhere → s' = [1/14 1/14 5/56 5/56 1/14 1/14] per head, M_1 = 5/56 ≈ .089.
struct TwoLayers {
  CaptureBuilder layer0 = uniform_capture({1, 1, 2, 3, 1, 1}, {1, 3, 1, 1, 1, 1});
  CaptureBuilder layer1 = uniform_capture({1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1});
  std::vector<LayerCapture> views() const { return {layer0.view(0, 2), layer1.view(1, 2)}; }
};

TEST(LayerDefensiveKv, CrossLayerBudgetCountsPerLayer) {
  const TwoLayers model;
  const auto layers = model.views();
  const LayerDefensiveKvMethod method(2);
  EXPECT_EQ(method.name(), "layer_defensivekv");
  // cr = .40625 (= 13/32): N_tot = int(8·(19/32)·2·2) = 19; the stage-1 clamp is
  // int(6·19/32 − 2) = 1, so j0 is forced to each layer's M in every head.
  //   layer 0: head 0 [M0 1/28 5/42 M0 1/14 1/14 M0 M0], head 1 [M0 3/28 5/84 5/112 1/14 1/14 M0
  //   M0] layer 1: each head [M1 1/14 M1 M1 1/14 1/14 M1 M1]
  // Ranked: 7 × M0 (.134), 5/42 (.119), 3/28 (.107) from layer 0, then 10 × M1 (.089) from layer 1
  // → 19 exactly: budgets 9 and 10 (per-layer DefensiveKV would give int(9.5) = 9 to each).
  const Budget budget{.compression = 0.40625};
  EXPECT_EQ(method.layer_budgets(layers, budget), (std::vector<std::int64_t>{9, 10}));
  const Selection kept = method.select(layers, budget, {});
  ASSERT_EQ(kept.kept.size(), 2u);
  EXPECT_EQ(kept.kept[0], (Kept{{0, 2, 3, 6, 7}, {0, 1, 6, 7}}));
  EXPECT_EQ(kept.kept[1], (Kept{{0, 2, 3, 6, 7}, {0, 2, 3, 6, 7}}));
}

TEST(LayerDefensiveKv, WindowIsNotProtectedAcrossLayers) {
  const TwoLayers model;
  const auto layers = model.views();
  const LayerDefensiveKvMethod method(2);
  // cr = .75: N_tot = int(8·.25·2·2) = 8; the clamp int(6·.25 − 2) = int(−.5) = 0 forces nothing.
  //   layer 0: head 0 [1/14 1/28 5/42 M0 1/14 1/14 M0 M0], head 1 [1/14 3/28 5/84 5/112 1/14 1/14
  //   M0 M0] layer 1: each head [1/14 1/14 M1 M1 1/14 1/14 M1 M1]
  // Ranked: 5 × M0, 5/42, 3/28 (7 in layer 0), then one of layer 1's eight M1 entries (the lowest
  // flat index: head 0, j2). Layer 1 keeps 1 entry: its windows are evicted by a raw comparison
  // with layer 0 (the layer-local M protects nothing across layers) and its head 1 is empty.
  const Budget budget{.compression = 0.75};
  EXPECT_EQ(method.layer_budgets(layers, budget), (std::vector<std::int64_t>{7, 1}));
  const Selection kept = method.select(layers, budget, {});
  EXPECT_EQ(kept.kept[0], (Kept{{2, 3, 6, 7}, {1, 6, 7}}));
  EXPECT_EQ(kept.kept[1], (Kept{{2}, {}}));
  // Per-layer DefensiveKV at the same cr keeps int(8·.25·2) = 4 per layer; even there the window
  // only TIES with the natural maximum (M, not M + 1), so layer 1's four picks are the lowest flat
  // indices among its eight M1 entries: head 0's j2 j3 j6 j7, and head 1 loses its window.
  const DefensiveKvMethod per_layer(2);
  const Selection local = per_layer.select(layers, budget, {});
  EXPECT_EQ(local.kept[1], (Kept{{2, 3, 6, 7}, {}}));
}

TEST(LayerDefensiveKv, NoCompressionKeepsEverything) {
  const TwoLayers model;
  const auto layers = model.views();
  const LayerDefensiveKvMethod method(2);
  const Selection kept = method.select(layers, {.compression = 0.0}, {});
  for (const auto& layer : kept.kept)
    for (const auto& head : layer) EXPECT_EQ(head.size(), 8u);
  EXPECT_EQ(method.layer_budgets(layers, {.compression = 0.0}),
            (std::vector<std::int64_t>{16, 16}));
}

}  // namespace
}  // namespace kvaudit::methods
