// KVgrad (methods/kvgrad.h): the per-layer scores of a pass on hand-computed inputs (KVzip's
// reconstruction attention × ‖W_O v‖ × the row's gradient norm, the max over rows and group),
// the refusal of a pass without gradient norms, the chunks and pass key, the selection (KVzip's),
// and the catalogue/factory wiring.
#include "methods/kvgrad.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/method_factory.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

using testing::OwnedLayer;
using testing::PassRows;

KvgradParams params(int n_sink = 4, bool layerwise = false, int chunk_size = 512) {
  KvgradParams p;
  p.layerwise = layerwise;
  p.n_sink = n_sink;
  p.chunk_size = chunk_size;
  return p;
}

// The chunk's view with the gradient norms the engine's backward would hand over.
PassLayerView with_gradients(const PassRows& rows, const std::vector<float>& gradient_norms) {
  PassLayerView v = rows.view();
  v.attention_output_gradient_norms = gradient_norms;
  return v;
}

TEST(Kvgrad, ScoreIsAttentionTimesValueOutputNormTimesGradientNorm) {
  const OwnedLayer o = testing::reconstruction_toy_layer();
  const KvgradMethod m(params());
  // One row (head 0 q = 1, head 1 q = 0, own key 0), ‖∂Φ/∂a‖ = 2. Head 0: (1, 2, 3)/7 ×
  // 5·(1, 2, 1) × 2 = (10, 40, 30)/7; head 1: 1/4 × (1, 2, 1) × 2 = (0.5, 1, 0.5).
  PassRows rows{{1, 0}, {0}, {0}, {0, 0}};
  ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
  m.observe(o.view(), PassChunk{{}, 0, 3}, with_gradients(rows, {2}), r);
  EXPECT_NEAR(r.at(0, 0, 0), 10.0f / 7.0f, 1e-5f);
  EXPECT_NEAR(r.at(0, 0, 1), 40.0f / 7.0f, 1e-5f);
  EXPECT_NEAR(r.at(0, 0, 2), 30.0f / 7.0f, 1e-5f);
}

TEST(Kvgrad, TheGradientNormWeighsEachRowBeforeTheMax) {
  const OwnedLayer o = testing::reconstruction_toy_layer();
  const KvgradMethod m(params());
  // Row 0: head 0 q = 1, ‖∂Φ/∂a‖ = 1; row 1: q = 0, own key ln 100 (row 0 must not see it),
  // ‖∂Φ/∂a‖ = 10. Head 0: row 0 (1, 2, 3)/7 × 5(1, 2, 1) = (5, 20, 15)/7; row 1: 1/5 × 5(1, 2, 1)
  // × 10 = (10, 20, 10). Head 1: row 0 (1, 2, 1)/4; row 1 (2, 4, 2). Max: (10, 20, 10). Without
  // the gradient weights the max would be (1, 20/7, 15/7).
  PassRows rows{{1, 0, 0, 0}, {0, std::log(100.0f)}, {0, 0}, {0, 0, 0, 0}};
  ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
  m.observe(o.view(), PassChunk{{}, 0, 3}, with_gradients(rows, {1, 10}), r);
  EXPECT_NEAR(r.at(0, 0, 0), 10.0f, 1e-4f);
  EXPECT_NEAR(r.at(0, 0, 1), 20.0f, 1e-4f);
  EXPECT_NEAR(r.at(0, 0, 2), 10.0f, 1e-4f);
}

TEST(Kvgrad, APassWithoutGradientNormsIsRefused) {
  const OwnedLayer o = testing::reconstruction_toy_layer();
  const KvgradMethod m(params());
  PassRows rows{{1, 0}, {0}, {0}, {0, 0}};
  ExtraPassResult r = testing::empty_pass_result(1, 1, 3);
  EXPECT_THROW(m.observe(o.view(), PassChunk{{}, 0, 3}, rows.view(), r), std::invalid_argument);
}

TEST(Kvgrad, ChunksAreKvzipsAndThePassKeyIsItsOwn) {
  PassPrompt prompt;
  prompt.prefix_length = 1;
  prompt.suffix = {90};
  prompt.repeat_first = {80, 81};
  prompt.repeat_next = {70};
  std::vector<std::int32_t> cached(1200);
  for (std::size_t i = 0; i < cached.size(); ++i) cached[i] = static_cast<std::int32_t>(i);
  const KvgradMethod g(params());
  KvzipParams z;
  z.chunk_size = 512;
  const KvzipMethod k(z);
  const auto ours = g.chunks(cached, prompt);
  const auto theirs = k.chunks(cached, prompt);
  ASSERT_EQ(ours.size(), 3u);  // 1199 reconstructed positions in chunks of 512
  for (std::size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i].tokens, theirs[i].tokens);
    EXPECT_EQ(ours[i].first, theirs[i].first);
    EXPECT_EQ(ours[i].end, theirs[i].end);
  }
  EXPECT_TRUE(g.needs_attention_output_gradients());
  EXPECT_FALSE(k.needs_attention_output_gradients());
  EXPECT_NE(g.pass_key(), k.pass_key());
  EXPECT_EQ(g.pass_key(), KvgradMethod(params(4, true)).pass_key());  // layerwise: selection only
  EXPECT_NE(g.pass_key(), KvgradMethod(params(2)).pass_key());
}

TEST(Kvgrad, SelectionIsKvzipsOnThePassScores) {
  // Two layers, one KV head, L = 6, n_sink = 1: KVzip's global bottom-int(N·cr) with the sink at
  // max + 1.
  std::vector<OwnedLayer> owned{testing::zero_layer(1, 1, 6, 2), testing::zero_layer(1, 1, 6, 2)};
  owned[1].layer = 1;
  for (OwnedLayer& o : owned) o.num_layers = 2;
  std::vector<LayerCapture> layers{owned[0].view(), owned[1].view()};
  ExtraPassResult pass = testing::empty_pass_result(2, 1, 6);
  pass.scores = {9, 1, 2, 8, 3, 7, /* layer 1 */ 0.5f, 6, 5, 0.1f, 4, 0.2f};
  const KvgradMethod m(params(1));
  const Selection s =
      m.select(layers, {.compression = 0.5}, {.seed = 0, .cell_key = 0, .extra_pass = &pass});
  // 6 of 12 pruned: 0.1, 0.2, 4 (layer 1) and 1, 2, 3 (layer 0); both positions 0 are sinks
  // (scored max + 1 = 10), so layer 1's 0.5 is kept.
  EXPECT_EQ(s.kept[0][0], (std::vector<std::int32_t>{0, 3, 5}));
  EXPECT_EQ(s.kept[1][0], (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_THROW(m.select(layers, {.compression = 0.5}, {.seed = 0, .cell_key = 0}),
               std::invalid_argument);
}

TEST(Kvgrad, CatalogueAndFactoryBuildItWithKvpressDefaults) {
  const auto m = make_method(MethodConfig{"g", "kvgrad", "", {}});
  EXPECT_EQ(m->name(), "kvgrad");
  ASSERT_NE(m->extra_pass(), nullptr);
  EXPECT_TRUE(m->extra_pass()->needs_attention_output_gradients());
  const auto& p = std::get<KvgradParams>(m->parameters());
  EXPECT_EQ(p.chunk_size, 512);
  EXPECT_EQ(p.n_sink, 4);
  EXPECT_FALSE(p.layerwise);
  EXPECT_THROW(make_method(MethodConfig{"g", "kvgrad", "", {{"chunk_size", std::int64_t{0}}}}),
               std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::methods
