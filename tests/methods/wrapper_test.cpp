// Wrappers over a fixed score table: AdaKV allocation (kvpress reservation and the original
// blend), ChunkKV chunking (partial last chunk, fallback), CriticalKV's two stages, PyramidKV's
// per-layer budgets applied to SnapKV scores, and FullMethod.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "methods/adakv.h"
#include "methods/chunkkv.h"
#include "methods/criticalkv.h"
#include "methods/full.h"
#include "methods/pyramidkv.h"
#include "methods/scorer_method.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

using testing::zero_layer;

using testing::FixedScorer;

using Kept = std::vector<std::vector<std::int32_t>>;

TEST(AdaKv, KvpressSafeguardThenGlobalTopK) {
  // Hkv = 2, L = 5, cr = 0.4 → n_kept = 3, n_safe = max(1, floor(0.6)) = 1, 6 entries in all.
  const std::vector<float> s = {9, 8, 7, 6, 5, 1, 0.5f, 0.4f, 0.3f, 0.2f};
  EXPECT_EQ(adakv_allocate(s, 2, 5, 3, 0.2, AdaKvVariant::kvpress), (Kept{{0, 1, 2, 3, 4}, {0}}));
  // α = 0: no safeguard, head 1 may lose everything.
  EXPECT_EQ(adakv_allocate(s, 2, 5, 3, 0.0, AdaKvVariant::kvpress), (Kept{{0, 1, 2, 3, 4}, {0}}));
  // A larger α reserves 2 per head: 4 reserved + the 2 best others (8, 7... of head 0).
  EXPECT_EQ(adakv_allocate(s, 2, 5, 3, 0.7, AdaKvVariant::kvpress), (Kept{{0, 1, 2, 3}, {0, 1}}));
}

TEST(AdaKv, OriginalBlendOfCountsAndFloor) {
  const std::vector<float> s = {9, 8, 7, 6, 5, 1, 0.5f, 0.4f, 0.3f, 0.2f};
  // counts (5, 1); B_h = round(c·0.8 + floor(0.6)) = round(4.0) = 4, round(0.8) = 1.
  EXPECT_EQ(adakv_allocate(s, 2, 5, 3, 0.2, AdaKvVariant::original), (Kept{{0, 1, 2, 3}, {0}}));
  // α = 0.5: B_h = round(2.5 + 1) = 4 (half to even), round(0.5 + 1) = 2.
  EXPECT_EQ(adakv_allocate(s, 2, 5, 3, 0.5, AdaKvVariant::original), (Kept{{0, 1, 2, 3}, {0, 1}}));
}

TEST(AdaKv, MethodUsesTheScorerPerLayer) {
  auto o = zero_layer(2, 2, 5, 2);
  const AdaKvMethod m(
      std::make_shared<FixedScorer>(std::vector<float>{9, 8, 7, 6, 5, 1, 0.5f, 0.4f, 0.3f, 0.2f}),
      0.2, AdaKvVariant::kvpress);
  const auto sel = m.select(std::vector{o.view(), o.view()}, {.compression = 0.4}, {});
  ASSERT_EQ(sel.kept.size(), 2u);
  EXPECT_EQ(sel.kept[1], (Kept{{0, 1, 2, 3, 4}, {0}}));
  EXPECT_EQ(sel.kept_entries(), 12);
  EXPECT_EQ(m.name(), "adakv(fixed)");
}

TEST(ChunkKv, PartialLastChunkIsItsOwnChunkAndAllHeadsShareIt) {
  // L = 7, chunk 3 → chunks [0,3), [3,6), [6,7). Sums over the 2 heads: (2,2,2), (1,1,1), (9).
  auto o = zero_layer(2, 2, 7, 2);
  const ChunkKvMethod m(std::make_shared<FixedScorer>(std::vector<float>{
                            1, 1, 1, 0.5f, 0.5f, 0.5f, 4, 1, 1, 1, 0.5f, 0.5f, 0.5f, 5}),
                        3);
  // cr 0.5: max(1, floor(3·0.5)) = 1 chunk → the partial one (mean 9).
  auto sel = m.select(std::vector{o.view()}, {.compression = 0.5}, {});
  EXPECT_EQ(sel.kept[0], (Kept{{6}, {6}}));
  // cr 0.3: floor(2.1) = 2 chunks → chunk 0 (mean 2) and the partial one.
  sel = m.select(std::vector{o.view()}, {.compression = 0.3}, {});
  EXPECT_EQ(sel.kept[0], (Kept{{0, 1, 2, 6}, {0, 1, 2, 6}}));
}

TEST(ChunkKv, NoCompleteChunkFallsBackToPerHeadTopK) {
  auto o = zero_layer(2, 2, 4, 2);
  const ChunkKvMethod m(std::make_shared<FixedScorer>(std::vector<float>{4, 3, 2, 1, 1, 2, 3, 4}),
                        20);
  const auto sel = m.select(std::vector{o.view()}, {.compression = 0.5}, {});
  EXPECT_EQ(sel.kept[0], (Kept{{0, 1}, {2, 3}}));
}

TEST(CriticalKv, StageOneForcesTopThenValueNormsRescale) {
  // H = Hkv = 1, d = 2, D = 1, o_proj = (1, 0): ‖v W_o‖₁ = |v[0]| = 1, 1, 10, 100.
  auto o = zero_layer(1, 1, 4, 2);
  o.values[0] = {1, 0, 1, 0, 10, 0, 100, 0};
  o.o_proj = {1, 0};
  o.hidden_size = 1;
  auto base = std::make_shared<FixedScorer>(std::vector<float>{4, 3, 2, 1});
  // cr 0.5: n_kept 2; stage 1 = floor(0.5·4·0.5) = 1 → position 0 forced; stage 2: 3, 20, 100.
  const ScorerMethod critical(std::make_shared<CriticalKvScorer>(base, 0.5, 1e-4));
  EXPECT_EQ(critical.select(std::vector{o.view()}, {.compression = 0.5}, {}).kept[0],
            (Kept{{0, 3}}));
  // No stage 1: (s+ε)·n = 4, 3, 20, 100 → {2, 3}.
  const ScorerMethod stage2_only(std::make_shared<CriticalKvScorer>(base, 0.0, 1e-4));
  EXPECT_EQ(stage2_only.select(std::vector{o.view()}, {.compression = 0.5}, {}).kept[0],
            (Kept{{2, 3}}));
  // Stage 1 is at least one token even when floor gives 0 (kvpress 0.5.5): cr 0.75, ratio 0.1.
  const ScorerMethod tiny(std::make_shared<CriticalKvScorer>(base, 0.1, 1e-4));
  EXPECT_EQ(tiny.select(std::vector{o.view()}, {.compression = 0.75}, {}).kept[0], (Kept{{0}}));
}

TEST(CriticalKv, ProjectedNormsAverageTheGroup) {
  // H = 2 on one KV head, d = 2, D = 2. o_proj [D, H·d] = rows (1, 0, 0, 2), (0, 1, 1, 0).
  auto o = zero_layer(1, 2, 1, 2);
  o.values[0] = {1, -3};
  o.hidden_size = 2;
  o.o_proj = {1, 0, 0, 2, 0, 1, 1, 0};
  // head 0: W = columns 0..1: out = (1·1 + −3·0, 1·0 + −3·1) = (1, −3) → 4;
  // head 1: columns 2..3: out = (1·0 + −3·2, 1·1 + −3·0) = (−6, 1) → 7. Mean 5.5.
  const auto n = projected_value_l1_norms(o.view());
  ASSERT_EQ(n.size(), 1u);
  EXPECT_FLOAT_EQ(n[0], 5.5f);
}

TEST(PyramidKv, LayersKeepTheirPyramidBudgets) {
  auto make = [](int layer) {
    auto o = zero_layer(1, 1, 100, 2);
    o.layer = layer;
    o.num_layers = 4;
    o.window_rows = 8;
    o.window_queries.assign(16, 0.0f);
    return o;
  };
  const std::vector<testing::OwnedLayer> owned = {make(0), make(1), make(2), make(3)};
  std::vector<LayerCapture> layers;
  for (const auto& o : owned) layers.push_back(o.view());
  const PyramidKvMethod m({.window = 8, .kernel_size = 5, .beta = 20});
  const auto sel = m.select(layers, {.compression = 0.5}, {});
  const std::vector<std::size_t> want = {92, 64, 36, 8};
  for (std::size_t l = 0; l < 4; ++l) {
    EXPECT_EQ(sel.kept[l][0].size(), want[l]);
    EXPECT_EQ(sel.kept[l][0].back(), 99);  // the window is protected
  }
}

TEST(Full, KeepsEverything) {
  auto o = zero_layer(2, 2, 3, 2);
  const auto sel = FullMethod{}.select(std::vector{o.view()}, {}, {});
  EXPECT_EQ(sel.kept[0], (Kept{{0, 1, 2}, {0, 1, 2}}));
}

}  // namespace
}  // namespace kvaudit::methods
