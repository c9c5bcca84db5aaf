// The queries group (kvpress NonCausalAttnPress, LeverageScorePress, CompactorPress, CapPress):
// hand-computed scores on tiny captures, the sketch draw, the budget-dependent blending, sinks,
// edge cases and the factory. The all-queries capture itself is tested in
// tests/unit_runner/all_queries_capture_test.cpp; parity with kvpress in kvpress_parity_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/bf16_rounding.h"
#include "methods/cap.h"
#include "methods/compactor.h"
#include "methods/leverage.h"
#include "methods/method_factory.h"
#include "methods/non_causal_attention.h"
#include "methods/scorer_method.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

using testing::OwnedLayer;
using testing::zero_layer;

// OwnedLayer plus the all-queries fields ([H, L, d], [H, L, d], [Hkv, L, d]).
struct QueriesLayer {
  OwnedLayer base;
  std::vector<float> queries, queries_prerope, keys_prerope;

  QueriesLayer(int kv_heads, int heads, int length, int head_dim)
      : base(zero_layer(kv_heads, heads, length, head_dim)) {
    const auto rows = static_cast<std::size_t>(length) * static_cast<std::size_t>(head_dim);
    queries.assign(static_cast<std::size_t>(heads) * rows, 0.0f);
    queries_prerope.assign(static_cast<std::size_t>(heads) * rows, 0.0f);
    keys_prerope.assign(static_cast<std::size_t>(kv_heads) * rows, 0.0f);
  }
  LayerCapture view() const {
    LayerCapture c = base.view();
    c.queries = queries;
    c.queries_prerope = queries_prerope;
    c.keys_prerope = keys_prerope;
    return c;
  }
  // Row j of head h ([heads, L, d] layout) of `v`.
  float* row(std::vector<float>& v, int h, int j) {
    return v.data() + (static_cast<std::size_t>(h) * static_cast<std::size_t>(base.length) +
                       static_cast<std::size_t>(j)) *
                          static_cast<std::size_t>(base.head_dim);
  }
  float* key(int h, int j) {
    return base.keys[static_cast<std::size_t>(h)].data() + j * base.head_dim;
  }
  float* value(int h, int j) {
    return base.values[static_cast<std::size_t>(h)].data() + j * base.head_dim;
  }
};

std::vector<float> scores_of(const Scorer& scorer, const LayerCapture& layer, double cr = 0.0) {
  std::vector<float> s(static_cast<std::size_t>(layer.num_kv_heads) *
                       static_cast<std::size_t>(layer.length));
  scorer.score_for_budget(layer, {.compression = cr}, {}, s);
  return s;
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol) << what << " " << i;
}

// ---------------------------------------------------------------------------------------------
// NonCausalAttention. L = 3, d = 2, one head, chunk_size 2: chunks {0, 1} and {2, padding}.
//   q0 = (0, 0), q1 = q2 = (1, 0); k0 = (ln 3, 0), k1 = (0, 1), k2 = (ln 3, 0) (no 1/√d scale).
//   chunk 0: row 0 logits (0, 0) → (1/2, 1/2); row 1 logits (ln 3, 0) → (3/4, 1/4)
//            a(0) = 1/2 + 3/4 = 1.25, a(1) = 1/2 + 1/4 = 0.75
//   chunk 1: row 2 logits (ln 3, −1e-9) → (3/4, 1/4); the padded row: (0, −1e-9) → (1/2, 1/2)
//            a(2) = 3/4 + 1/2 = 1.25
//   ‖v‖ = 1, 2, 5 → a·‖v‖ = 1.25, 1.5, 6.25
//   avg_pool3 (zero padding counted): (0 + 1.25 + 1.5)/3 = 0.916667, (1.25 + 1.5 + 6.25)/3 = 3,
//   (1.5 + 6.25 + 0)/3 = 2.583333
//   z: mean 2.166667, unbiased std 1.102396 → (−1.133893, 0.755929, 0.377964)
QueriesLayer non_causal_example() {
  QueriesLayer q(1, 1, 3, 2);
  const float ln3 = std::log(3.0f);
  q.row(q.queries, 0, 1)[0] = 1.0f;
  q.row(q.queries, 0, 2)[0] = 1.0f;
  q.key(0, 0)[0] = ln3;
  q.key(0, 1)[1] = 1.0f;
  q.key(0, 2)[0] = ln3;
  q.value(0, 0)[0] = 1.0f;
  q.value(0, 1)[1] = 2.0f;
  q.value(0, 2)[0] = 3.0f;
  q.value(0, 2)[1] = 4.0f;
  return q;
}

TEST(QueriesNonCausalAttention, HandComputedChunksPaddingPoolingAndZScore) {
  const QueriesLayer q = non_causal_example();
  const LayerCapture layer = q.view();
  expect_near_all(non_causal_attention_scores(layer, 0, 3, 2), {0.916667, 3.0, 2.583333}, 1e-5,
                  "raw");
  NonCausalAttentionScorer scorer({.chunk_size = 2});
  expect_near_all(scores_of(scorer, layer), {-1.133893, 0.755929, 0.377964}, 1e-5, "z");
}

TEST(QueriesNonCausalAttention, GroupMeanOfQueryHeads) {
  // Two query heads on one KV head; head 1's queries are zero: uniform 1/2 in every chunk, so
  // a_1 = (1, 1, 1) (the padded row adds 1/2 to position 2). Mean a = (1.125, 0.875, 1.125);
  // a·‖v‖ = (1.125, 1.75, 5.625); pooled (0.958333, 2.833333, 2.458333).
  QueriesLayer q = non_causal_example();
  QueriesLayer two(1, 2, 3, 2);
  two.base.keys = q.base.keys;
  two.base.values = q.base.values;
  std::copy(q.queries.begin(), q.queries.end(), two.queries.begin());  // head 0 as before
  expect_near_all(non_causal_attention_scores(two.view(), 0, 3, 2), {0.958333, 2.833333, 2.458333},
                  1e-5, "group");
}

TEST(QueriesNonCausalAttention, OneChunkWithoutPaddingAndSlices) {
  // chunk_size 3 = L: no padding; row 0 (0, 0, 0) → 1/3 each; rows 1 and 2: logits (ln 3, 0, ln 3)
  // → (3/7, 1/7, 3/7). a = (1/3 + 6/7, 1/3 + 2/7, 1/3 + 6/7) = (1.190476, 0.619048, 1.190476).
  const QueriesLayer q = non_causal_example();
  const LayerCapture layer = q.view();
  const std::vector<float> s = non_causal_attention_scores(layer, 0, 3, 3);
  // a·‖v‖ = (1.190476, 1.238095, 5.952381); pooled (0.809524, 2.793651, 2.396825).
  expect_near_all(s, {0.809524, 2.793651, 2.396825}, 1e-5, "one chunk");
  // A slice (CompactorPress): positions 1..2 only, one chunk of 2: row 1 logits (0, ln 3) →
  // (1/4, 3/4); row 2 the same → a = (0.5, 1.5); a·‖v‖ = (1, 7.5); pooled (8.5/3, 8.5/3).
  expect_near_all(non_causal_attention_scores(layer, 1, 2, 2), {2.833333, 2.833333}, 1e-5, "slice");
}

// ---------------------------------------------------------------------------------------------
// Leverage. L = 4, d = 2, Hkv = 1, sketch Φ = [[1], [0]] (k = 1, injected).
//   pre-RoPE keys' first coordinates 1, 2, 3, 6 (second 0): mean 3, X = (−2, −1, 0, 3)
//   G = XᵀX + 0.01 = 14.01; ℓ = x²/G = (0.285510, 0.071378, 0, 0.642398)
//   z: (0.123718, −0.618590, −0.866025, 1.360897)
QueriesLayer leverage_example(int length = 4) {
  QueriesLayer q(1, 1, length, 2);
  const float first[] = {1, 2, 3, 6};
  for (int j = 0; j < 4; ++j) q.row(q.keys_prerope, 0, j)[0] = first[j];
  return q;
}

const std::vector<float> kUnitSketch = {1.0f, 0.0f};  // [Hkv=1, d=2, k=1]

TEST(QueriesLeverage, HandComputedRidgeLeverageAndZScore) {
  const QueriesLayer q = leverage_example();
  const LayerCapture layer = q.view();
  expect_near_all(leverage_scores(layer, 0, 4, kUnitSketch, 1), {0.285510, 0.071378, 0.0, 0.642398},
                  1e-6, "raw");
  LeverageScorer scorer({.sketch_dimension = 1}, [](const LayerCapture&) { return kUnitSketch; });
  expect_near_all(scores_of(scorer, layer), {0.123718, -0.618590, -0.866025, 1.360897}, 1e-5, "z");
  EXPECT_FALSE(scorer.scores_depend_on_cell());  // an injected sketch is fixed
  // Kept with cr 0.5 (n_kept 2): positions 0 and 3.
  ScorerMethod method(std::make_shared<LeverageScorer>(
      LeverageParams{.sketch_dimension = 1}, [](const LayerCapture&) { return kUnitSketch; }));
  const LayerCapture layers[] = {layer};
  EXPECT_EQ(method.select(layers, {.compression = 0.5}, {}).kept[0][0],
            (std::vector<std::int32_t>{0, 3}));
}

TEST(QueriesLeverage, SketchIsPhiloxKeyedByCellSeedAndLayerAndScaled) {
  QueriesLayer q(2, 2, 4, 64);
  LayerCapture layer = q.view();
  const SelectionContext a{.seed = 7, .cell_key = 11}, b{.seed = 7, .cell_key = 12},
      c{.seed = 8, .cell_key = 11};
  const std::vector<float> sa = draw_sketch(layer, 48, a);
  ASSERT_EQ(sa.size(), 2u * 64u * 48u);
  EXPECT_EQ(sa, draw_sketch(layer, 48, a));  // deterministic
  EXPECT_NE(sa, draw_sketch(layer, 48, b));  // another cell
  EXPECT_NE(sa, draw_sketch(layer, 48, c));  // another study seed
  layer.layer = 1;
  EXPECT_NE(sa, draw_sketch(layer, 48, a));  // another layer
  // N(0, 1/k): over 6,144 draws the mean is within 4 standard errors of 0 and the variance
  // within 10% of 1/48.
  double sum = 0, squares = 0;
  for (const float v : sa) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(sa.size());
  const double mean = sum / n, variance = squares / n - mean * mean;
  EXPECT_LT(std::abs(mean), 4.0 * std::sqrt(1.0 / 48.0 / n));
  EXPECT_NEAR(variance * 48.0, 1.0, 0.1);
  // bf16 models draw in bf16.
  layer.model_is_bf16 = true;
  for (const float v : draw_sketch(layer, 48, a)) ASSERT_EQ(v, round_to_bf16(v));
  // Without an injected sketch the scores depend on the cell (never shared through a ScoreMemo).
  EXPECT_TRUE(LeverageScorer({}).scores_depend_on_cell());
}

// ---------------------------------------------------------------------------------------------
// Compactor. L = 6, sink_size_start 1, sink_size_end 1: the slice is positions 1..4.
//   Leverage of the slice: pre-RoPE keys (1, 2, 3, 6) as above (positions 0 and 5 hold (50, 50),
//   outside the centring) → z_lev = (0.123718, −0.618590, −0.866025, 1.360897).
//   Non-causal attention: zero queries → uniform rows; chunk 8 > 4: every valid key gets 4/8 from
//   the real rows and 4/8 from the padded rows, a = 1; ‖v‖ = 1, 2, 3, 4 → pooled
//   (1, 2, 3, 7/3) → z_att = (−1.3, −0.1, 1.1, 0.3).
//   kvpress variant, cr 0.5: s = 0.5·z_lev + z_att = (−1.238141, −0.409295, 0.666987, 0.980449);
//   sinks (positions 0 and 5) = max = 0.980449.
//   fixed_blending 0.35: (−1.256699, −0.316506, 0.796891, 0.776314), sinks 0.796891.
QueriesLayer compactor_example() {
  QueriesLayer q(1, 1, 6, 2);
  const float first[] = {50, 1, 2, 3, 6, 50};
  for (int j = 0; j < 6; ++j) {
    q.row(q.keys_prerope, 0, j)[0] = first[j];
    if (j == 0 || j == 5) q.row(q.keys_prerope, 0, j)[1] = 50;
  }
  const float norms[] = {100, 1, 2, 3, 4, 100};
  for (int j = 0; j < 6; ++j) q.value(0, j)[j % 2] = norms[j];
  return q;
}

CompactorParams small_compactor(CompactorVariant variant) {
  return {.variant = variant,
          .sink_size_start = 1,
          .sink_size_end = 1,
          .chunk_size = 8,
          .sketch_dimension = 1,
          .blending = 0.35};
}

SketchSource unit_sketch() {
  return [](const LayerCapture&) { return kUnitSketch; };
}

TEST(QueriesCompactor, BlendsByTheCompressionRatioAndProtectsSinksWithTheMax) {
  const QueriesLayer q = compactor_example();
  const LayerCapture layer = q.view();
  CompactorScorer scorer(small_compactor(CompactorVariant::kvpress), unit_sketch());
  EXPECT_TRUE(scorer.scores_depend_on_budget());
  expect_near_all(scores_of(scorer, layer, 0.5),
                  {0.980449, -1.238141, -0.409295, 0.666987, 0.980449, 0.980449}, 1e-5, "cr 0.5");
  // cr 0: leverage weighs nothing, s = z_att.
  expect_near_all(scores_of(scorer, layer, 0.0), {1.1, -1.3, -0.1, 1.1, 0.3, 1.1}, 1e-5, "cr 0");
  CompactorScorer fixed(small_compactor(CompactorVariant::fixed_blending), unit_sketch());
  EXPECT_FALSE(fixed.scores_depend_on_budget());
  expect_near_all(scores_of(fixed, layer, 0.9),
                  {0.796891, -1.256699, -0.316506, 0.796891, 0.776314, 0.796891}, 1e-5, "fixed");
  // Selection at cr 0.5 (n_kept 3): the sinks and position 4, all at the max.
  const auto method =
      make_method_with_sketch(small_compactor(CompactorVariant::kvpress), unit_sketch());
  const LayerCapture layers[] = {layer};
  EXPECT_EQ(method->select(layers, {.compression = 0.5}, {}).kept[0][0],
            (std::vector<std::int32_t>{0, 4, 5}));
  // Budget 1 (cr 0.9 → max(1, floor(0.6)) = 1): s = 0.9·z_lev + z_att = (−1.188654, −0.656731,
  // 0.320577, 1.524807), so position 4 and the two sinks tie at the max; one of them is kept.
  const auto one = method->select(layers, {.compression = 0.9}, {}).kept[0][0];
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0] == 0 || one[0] == 4 || one[0] == 5) << one[0];
}

TEST(QueriesCompactor, OnlySinksScoresEverythingZero) {
  QueriesLayer q(1, 1, 2, 2);
  CompactorScorer scorer(small_compactor(CompactorVariant::kvpress), unit_sketch());
  expect_near_all(scores_of(scorer, q.view(), 0.5), {0.0, 0.0}, 0.0, "L = 2 = sinks");
  QueriesLayer one(1, 1, 1, 2);  // L = 1: left sink 1, right sink 0
  expect_near_all(scores_of(scorer, one.view(), 0.5), {0.0}, 0.0, "L = 1");
}

// ---------------------------------------------------------------------------------------------
// Cap. L = 3, d = 2, n_sink 1, rope_inv_freq {0} (every rotation is the identity, R̄ = I).
//   pre-RoPE queries of rows 1, 2 = (1, 0) (row 0 = (0, 5) is a sink row, excluded) → μ = (1, 0)
//   keys k1 = (2, 0), k2 = (0, 3) → c = (1, 0); τ = 5: logits (5, 0) → w = (1, e⁻⁵)
//   values v1 = (1, 0), v2 = (0, 1); ε = 0: A = diag(1 + 1, 1 + e⁻⁵)
//   s1 = 1·1/2 = 0.5, s2 = e⁻⁵/(1 + e⁻⁵) = 0.006692851; sink s0 = 0.5 + 1 = 1.5
//   ε = 0.25: A = diag(2.25, 1.25 + e⁻⁵) → s1 = 0.444444, s2 = 0.005361457
QueriesLayer cap_example(int heads = 1) {
  QueriesLayer q(1, heads, 3, 2);
  q.base.rope_inv_freq = {0.0f};
  for (int h = 0; h < heads; ++h) {
    q.row(q.queries_prerope, h, 0)[1] = 5.0f;
    q.row(q.queries_prerope, h, 1)[h % 2] = 1.0f;
    q.row(q.queries_prerope, h, 2)[h % 2] = 1.0f;
  }
  q.key(0, 1)[0] = 2.0f;
  q.key(0, 2)[1] = 3.0f;
  q.value(0, 1)[0] = 1.0f;
  q.value(0, 2)[1] = 1.0f;
  return q;
}

TEST(QueriesCap, HandComputedCapacityLeverage) {
  const QueriesLayer q = cap_example();
  CapScorer scorer({.tau = 5.0, .n_future_positions = 8, .n_sink = 1, .epsilon = 0.0});
  expect_near_all(scores_of(scorer, q.view()), {1.5, 0.5, 0.006692851}, 1e-6, "eps 0");
  CapScorer with_epsilon({.tau = 5.0, .n_future_positions = 8, .n_sink = 1, .epsilon = 0.25});
  expect_near_all(scores_of(with_epsilon, q.view()), {1.444444, 0.444444, 0.005361457}, 1e-6,
                  "eps 0.25");
}

TEST(QueriesCap, GroupMeanOverQueryHeads) {
  // Head 1's anchor is (0, 1): c = (0, 1), w = (e⁻⁵, 1) → s = (e⁻⁵/(1 + e⁻⁵)·…): with A =
  // diag(1 + e⁻⁵, 2): s1 = e⁻⁵/(1 + e⁻⁵) = 0.006692851, s2 = 0.5. Mean over the two heads:
  // both 0.253346; sink 1.253346.
  const QueriesLayer q = cap_example(2);
  CapScorer scorer({.tau = 5.0, .n_future_positions = 8, .n_sink = 1, .epsilon = 0.0});
  expect_near_all(scores_of(scorer, q.view()), {1.253346, 0.253346, 0.253346}, 1e-6, "group");
}

TEST(QueriesCap, RequiresMoreThanNSinkPositions) {
  QueriesLayer q(1, 1, 4, 2);
  q.base.rope_inv_freq = {0.0f};
  CapScorer scorer({});
  EXPECT_THROW(scores_of(scorer, q.view()), std::invalid_argument);  // L = 4 = n_sink
}

// ---------------------------------------------------------------------------------------------
// Capture requirements, the factory, the catalog.

TEST(QueriesGroup, RefusesACaptureWithoutAllQueries) {
  const QueriesLayer q = cap_example();
  const LayerCapture without = q.base.view();  // queries / keys_prerope empty
  const std::vector<std::shared_ptr<Scorer>> scorers = {
      std::make_shared<NonCausalAttentionScorer>(NonCausalAttentionParams{}),
      std::make_shared<LeverageScorer>(LeverageParams{}),
      std::make_shared<CompactorScorer>(CompactorParams{}),
      std::make_shared<CapScorer>(CapParams{.n_sink = 1})};
  for (const auto& scorer : scorers) {
    EXPECT_TRUE(scorer->needs_all_queries()) << scorer->name();
    try {
      scores_of(*scorer, without);
      ADD_FAILURE() << scorer->name() << " accepted a capture without the queries";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("needs_all_queries"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(scorer->name()), std::string::npos) << e.what();
    }
  }
}

MethodConfig cfg(std::string id, std::map<std::string, ParamValue> params = {},
                 std::string variant = "", std::string name = "x") {
  return MethodConfig{std::move(name), std::move(id), std::move(variant), std::move(params)};
}

TEST(QueriesGroup, FactoryBuildsTypedMethodsThatAskForAllQueries) {
  for (const char* id : {"non_causal_attention", "leverage", "compactor", "cap"}) {
    const auto method = make_method(cfg(id));
    EXPECT_TRUE(method->needs_all_queries()) << id;
    EXPECT_EQ(method->name(), id);
  }
  const auto compactor = make_method(cfg("compactor", {{"blending", 0.5}}, "fixed_blending"));
  const auto& p = std::get<CompactorParams>(compactor->parameters());
  EXPECT_EQ(p.variant, CompactorVariant::fixed_blending);
  EXPECT_EQ(p.blending, 0.5);
  EXPECT_EQ(p.sink_size_start, 8);
  EXPECT_EQ(p.sink_size_end, 4);
  EXPECT_EQ(p.chunk_size, 256);
  EXPECT_EQ(p.sketch_dimension, 48);
  EXPECT_EQ(std::get<CompactorParams>(make_method(cfg("compactor"))->parameters()).variant,
            CompactorVariant::kvpress);
  const auto cap = std::get<CapParams>(make_method(cfg("cap"))->parameters());
  EXPECT_EQ(cap.tau, 5.0);
  EXPECT_EQ(cap.n_future_positions, 512);
  EXPECT_EQ(cap.n_sink, 4);
  EXPECT_EQ(cap.epsilon, 1e-6);
  EXPECT_EQ(std::get<LeverageParams>(make_method(cfg("leverage"))->parameters()).sketch_dimension,
            48);
  EXPECT_EQ(
      std::get<NonCausalAttentionParams>(make_method(cfg("non_causal_attention"))->parameters())
          .chunk_size,
      256);
  // Wrappers forward the request (AdaKV over compactor).
  std::map<std::string, MethodConfig> named{{"c", cfg("compactor", {}, "", "c")}};
  const auto wrapped = make_method(cfg("adakv", {{"scorer", std::string("c")}}),
                                   [&](const std::string& n) -> const MethodConfig* {
                                     auto it = named.find(n);
                                     return it == named.end() ? nullptr : &it->second;
                                   });
  EXPECT_TRUE(wrapped->needs_all_queries());
  // Bad values are refused (the manifest layer checks the same ranges at plan time).
  EXPECT_THROW(make_method(cfg("non_causal_attention", {{"chunk_size", std::int64_t{0}}})),
               std::invalid_argument);
  EXPECT_THROW(make_method(cfg("leverage", {{"sketch_dimension", std::int64_t{0}}})),
               std::invalid_argument);
  EXPECT_THROW(make_method(cfg("compactor", {{"blending", -0.5}}, "fixed_blending")),
               std::invalid_argument);
  EXPECT_THROW(make_method(cfg("cap", {{"tau", -1.0}})), std::invalid_argument);
  EXPECT_THROW(make_method_with_sketch(CapParams{}, unit_sketch()), std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::methods
