// Layer-budget methods (group layer_budgets): CAKE (methods/cake.h) and SqueezeAttention
// (methods/squeezeattention.h), their shared budget helpers (methods/layer_budgets.h),
// hand-computed formulas on small inputs, the budget rules (Σ_ℓ n_ℓ = N·n_kept, caps, rounding),
// edge cases, and agreement with each method's OFFICIAL code on small random inputs
// (tests/golden/layer_budgets/official.json, made by tools/golden/make_layer_budget_golden.py: the
// official CAKE forward itself; SqueezeAttention's clustering/budget/StreamingLLM code restated).
#include "methods/layer_budgets.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/cake.h"
#include "methods/method_factory.h"
#include "methods/method_resolution.h"
#include "methods/squeezeattention.h"
#include "methods/streaming_llm.h"
#include "test_capture.h"

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit::methods {
namespace {

using testing::OwnedLayer;
using testing::zero_layer;

std::int64_t total_kept(const Selection& s, std::size_t layer) {
  std::int64_t n = 0;
  for (const auto& head : s.kept[layer]) n += static_cast<std::int64_t>(head.size());
  return n;
}

std::vector<std::int32_t> range(std::int32_t begin, std::int32_t end) {
  std::vector<std::int32_t> v;
  for (std::int32_t j = begin; j < end; ++j) v.push_back(j);
  return v;
}

// ------------------------------------------------------------------------------ shared helpers
TEST(LayerBudgets, FitLeavesValidBudgetsAlone) {
  EXPECT_EQ(fit_layer_budgets({3, 5, 2}, 10, 0, 6), (std::vector<std::int64_t>{3, 5, 2}));
}

TEST(LayerBudgets, FitClampsAndSpreadsInLayerOrder) {
  // {10, 0, 5} → clamp to cap 6: {6, 0, 5} (11); +1 over the layers below 6 (1, 2): ⌊1/2⌋ = 0
  // each, the first one more → {6, 1, 5}.
  EXPECT_EQ(fit_layer_budgets({10, 0, 5}, 12, 0, 6), (std::vector<std::int64_t>{6, 1, 5}));
  // Surplus 3 over three layers above the floor 1: one each.
  EXPECT_EQ(fit_layer_budgets({4, 4, 4}, 9, 1, 10), (std::vector<std::int64_t>{3, 3, 3}));
  // Spreading hits the cap: {9, 0, 0} to 20 with cap 10: +11 over 3 layers wants {4, 4, 3}, layer 0
  // takes only 1 → {10, 4, 3} (17); +3 over layers 1, 2 wants {2, 1} → {10, 6, 4} (20).
  const auto fitted = fit_layer_budgets({9, 0, 0}, 20, 0, 10);
  EXPECT_EQ(std::accumulate(fitted.begin(), fitted.end(), std::int64_t{0}), 20);
  EXPECT_EQ(fitted, (std::vector<std::int64_t>{10, 6, 4}));
  EXPECT_THROW(fit_layer_budgets({1, 1}, 30, 0, 10), std::invalid_argument);
  EXPECT_THROW(fit_layer_budgets({1, 1}, 1, 1, 10), std::invalid_argument);
}

TEST(LayerBudgets, BudgetForKeptIsExactForEveryCount) {
  for (std::int64_t L = 1; L <= 300; ++L) {
    for (std::int64_t n = 1; n <= L; ++n) {
      ASSERT_EQ(kept_count(L, budget_for_kept(L, n).compression), n) << "L=" << L << " n=" << n;
    }
  }
  EXPECT_THROW(budget_for_kept(10, 0), std::invalid_argument);
  EXPECT_THROW(budget_for_kept(10, 11), std::invalid_argument);
}

TEST(LayerBudgets, TopKPlusWindowKeepsTheWindow) {
  // One KV head, scores over the first 4 of 6 positions; top-2 = positions 3 and 1.
  const std::vector<float> scores = {0.1f, 0.7f, 0.2f, 0.9f};
  const auto kept = top_k_plus_window(scores, 1, 4, 6, 2);
  EXPECT_EQ(kept[0], (std::vector<std::int32_t>{1, 3, 4, 5}));
}

// ------------------------------------------------------------------------------ CAKE formulas
// One layer, L = 4, w = 2, d = 2 (scale 1/√2), keys k = [(√2·ln 2, 0), 0, 0, 0], so the logits
// q·k/√2 are ln 2 for key 0 and 0 otherwise when query head 0 has q = (1, 0) in both window rows;
// head 1 has q = 0; one KV head (GQA group of 2).
// Head 0: row 0 (position 2) sees keys 0..2 → exp [2, 1, 1]/4 = [0.5, 0.25, 0.25];
//         row 1 (position 3) sees keys 0..3 → [2, 1, 1, 1]/5 = [0.4, 0.2, 0.2, 0.2].
// Head 1: uniform: row 0 [1/3, 1/3, 1/3], row 1 [1/4]·4.
// Prefix P = 2 (j = 0, 1):
//   D = −Σ a ln a = head 0: 0.5 ln 2 + 0.25 ln 4 + 0.4 ln 2.5 + 0.2 ln 5
//                         = 0.346574 + 0.346574 + 0.366516 + 0.321888 = 1.381551
//       head 1: 2·(1/3) ln 3 + 2·(1/4) ln 4 = 0.732408 + 0.693147 = 1.425555;   D = 2.807106
//   var (unbiased, 2 rows): head 0 j0 {0.5, 0.4} → 0.005, j1 {0.25, 0.2} → 0.00125;
//       head 1 j0, j1 {1/3, 1/4} → 2·(1/24)² = 1/288;   V = 0.00625 + 2/288 = 0.0131944
//   indicator (γ = 200): head 0 j0 0.45 + 1 = 1.45, j1 0.225 + 0.25 = 0.475;
//       head 1: 7/24 + 200/288 = 0.986111;  group mean: j0 1.218056, j1 0.730556 (kernel 1).
OwnedLayer cake_hand_layer() {
  OwnedLayer o = zero_layer(1, 2, 4, 2);
  o.keys[0][0] = static_cast<float>(std::sqrt(2.0) * std::log(2.0));
  o.window_rows = 2;
  o.window_queries = {1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};  // [H=2, w=2, d=2]
  return o;
}

TEST(Cake, HandComputedDispersionShiftAndIndicator) {
  const OwnedLayer o = cake_hand_layer();
  CakeParams params{.window = 2, .kernel_size = 1, .tau1 = 1.0, .tau2 = 1.0, .gamma = 200.0};
  const auto stats = cake_layer_statistics(o.view(), params);
  EXPECT_NEAR(stats.dispersion, 2.807106, 1e-5);
  EXPECT_NEAR(stats.shift, 0.00625 + 2.0 / 288.0, 1e-7);
  EXPECT_NEAR(stats.preference, 2.807106 * (0.00625 + 2.0 / 288.0), 1e-6);
  ASSERT_EQ(stats.indicator.size(), 2u);
  EXPECT_NEAR(stats.indicator[0], (1.45 + 0.986111) / 2, 1e-5);
  EXPECT_NEAR(stats.indicator[1], (0.475 + 0.986111) / 2, 1e-5);
}

TEST(Cake, TemperaturesAndPooling) {
  const OwnedLayer o = cake_hand_layer();
  // τ1 = 2, τ2 = 0.5: D^(1/2)·V^2 = √2.807106 · 0.0131944² = 1.675442 · 1.740934e-4 = 2.916834e-4.
  CakeParams params{.window = 2, .kernel_size = 1, .tau1 = 2.0, .tau2 = 0.5, .gamma = 200.0};
  EXPECT_NEAR(cake_layer_statistics(o.view(), params).preference, 2.916834e-4, 1e-9);
  // Kernel 3 (zero padding, ÷3) per query head, then the group mean:
  //   head 0: j0 (0 + 1.45 + 0.475)/3 = 0.641667, j1 the same; head 1: j0, j1 2·0.986111/3 =
  //   0.657407 → both 0.649537.
  params = {.window = 2, .kernel_size = 3, .tau1 = 1.0, .tau2 = 1.0, .gamma = 200.0};
  const auto pooled = cake_layer_statistics(o.view(), params).indicator;
  EXPECT_NEAR(pooled[0], 0.649537, 1e-5);
  EXPECT_NEAR(pooled[1], 0.649537, 1e-5);
  // γ = 0: the indicator is the window mean: (0.45 + 7/24)/2 = 0.370833, (0.225 + 7/24)/2 =
  // 0.258333.
  params = {.window = 2, .kernel_size = 1, .tau1 = 1.0, .tau2 = 1.0, .gamma = 0.0};
  const auto mean_only = cake_layer_statistics(o.view(), params).indicator;
  EXPECT_NEAR(mean_only[0], 0.370833, 1e-5);
  EXPECT_NEAR(mean_only[1], 0.258333, 1e-5);
}

TEST(Cake, AdjustBudgetsAsTheOfficialCode) {
  // Truncate {10, 50, 3}; cap 40 → excess 10 over layers 0, 2: +5 each → {15, 40, 8} (63);
  // −3 over the layers above 1 (all): −1 each → {14, 39, 7}.
  const std::vector<double> raw = {10.7, 50.2, 3.9};
  EXPECT_EQ(cake_adjust_budgets(raw, 60, 40), (std::vector<std::int64_t>{14, 39, 7}));
  // {1, 1, 1, 1} short by 6: +1 each, the remainder 2 to the first two → {3, 3, 2, 2}.
  const std::vector<double> quarter = {1.5, 1.5, 1.5, 1.5};
  EXPECT_EQ(cake_adjust_budgets(quarter, 10, 100), (std::vector<std::int64_t>{3, 3, 2, 2}));
  // The official rounding can leave a layer above the cap: {15, 9, 0} → cap 10, excess 5 over
  // layers 1, 2 (+3, +2) → {10, 12, 2}, +1 to layer 2 → {10, 12, 3}; our fit then moves the 2
  // above the cap to the layer below it → {10, 10, 5}.
  const std::vector<double> over = {15.0, 9.5, 0.5};
  const auto adjusted = cake_adjust_budgets(over, 25, 10);
  EXPECT_EQ(adjusted, (std::vector<std::int64_t>{10, 12, 3}));
  EXPECT_EQ(fit_layer_budgets(adjusted, 25, 0, 10), (std::vector<std::int64_t>{10, 10, 5}));
}

TEST(Cake, LayerBudgetsFollowPreferences) {
  // P = {1, 3}, total 4: raw {1, 3}.
  EXPECT_EQ(cake_layer_budgets(std::vector<double>{1, 3}, 4, 6), (std::vector<std::int64_t>{1, 3}));
  // P = {1, 2}, total 10: raw {3.33, 6.67} → {3, 6}, +1 to layer 0 → {4, 6}.
  EXPECT_EQ(cake_layer_budgets(std::vector<double>{1, 2}, 10, 6),
            (std::vector<std::int64_t>{4, 6}));
  // P = {1, 1000}: {0, 9} → cap 6, excess 3 to layer 0 → {3, 6}; +1 → {4, 6}.
  EXPECT_EQ(cake_layer_budgets(std::vector<double>{1, 1000}, 10, 6),
            (std::vector<std::int64_t>{4, 6}));
  // No usable preference: even split.
  EXPECT_EQ(cake_layer_budgets(std::vector<double>{0, 0}, 10, 6),
            (std::vector<std::int64_t>{5, 5}));
}

// Two layers of L = 8, w = 2, d = 2 (second component 0): layer 0 peaked on position 0, layer 1
// uniform.
std::vector<OwnedLayer> cake_two_layers() {
  std::vector<OwnedLayer> owned;
  for (int l = 0; l < 2; ++l) {
    OwnedLayer o = zero_layer(1, 1, 8, 2);
    o.layer = l;
    o.num_layers = 2;
    if (l == 0) {
      const std::vector<float> first = {2.0f, 0.5f, -0.5f, 0.25f, 0.0f, 0.1f, 0.0f, 0.0f};
      for (std::size_t j = 0; j < 8; ++j) o.keys[0][2 * j] = first[j];
    }
    o.window_rows = 2;
    o.window_queries = {1.0f, 0.0f, 1.0f, 0.0f};
    owned.push_back(o);
  }
  return owned;
}

TEST(Cake, SelectionKeepsTheCellTotalAndTheWindow) {
  const auto owned = cake_two_layers();
  std::vector<LayerCapture> layers;
  for (const auto& o : owned) layers.push_back(o.view());
  const CakeMethod method(CakeParams{.window = 2});
  for (const std::int64_t n_kept : {3, 4, 5, 7, 8}) {
    const Selection s = method.select(layers, budget_for_kept(8, n_kept), {});
    ASSERT_EQ(s.kept.size(), 2u);
    EXPECT_EQ(total_kept(s, 0) + total_kept(s, 1), 2 * n_kept) << n_kept;
    std::vector<double> preferences;
    for (const auto& layer : layers)
      preferences.push_back(cake_layer_statistics(layer, CakeParams{.window = 2}).preference);
    const auto budgets = cake_layer_budgets(preferences, 2 * (n_kept - 2), 6);
    for (std::size_t l = 0; l < 2; ++l) {
      const auto& kept = s.kept[l][0];
      EXPECT_EQ(static_cast<std::int64_t>(kept.size()), budgets[l] + 2);
      EXPECT_EQ(kept[kept.size() - 2], 6);  // the window
      EXPECT_EQ(kept.back(), 7);
    }
  }
  EXPECT_EQ(method.window_needed(), 2);
  EXPECT_EQ(method.name(), "cake");
}

TEST(Cake, BudgetAtMostTheWindowKeepsTheMostRecent) {
  const auto owned = cake_two_layers();
  std::vector<LayerCapture> layers;
  for (const auto& o : owned) layers.push_back(o.view());
  const CakeMethod method(CakeParams{.window = 2});
  const Selection s = method.select(layers, budget_for_kept(8, 1), {});
  EXPECT_EQ(s.kept[0][0], (std::vector<std::int32_t>{7}));
  const Selection two = method.select(layers, budget_for_kept(8, 2), {});
  EXPECT_EQ(two.kept[1][0], (std::vector<std::int32_t>{6, 7}));
}

TEST(Cake, RejectsWindowsItCannotServe) {
  EXPECT_THROW(CakeMethod(CakeParams{.window = 1}), std::invalid_argument);
  EXPECT_THROW(CakeMethod(CakeParams{.kernel_size = 4}), std::invalid_argument);
  const auto owned = cake_two_layers();
  std::vector<LayerCapture> layers;
  for (const auto& o : owned) layers.push_back(o.view());
  // Window 8 = L: the capture cannot serve it.
  EXPECT_THROW(CakeMethod(CakeParams{.window = 8}).select(layers, {.compression = 0.5}, {}),
               std::invalid_argument);
}

// ------------------------------------------------------------------------------ SqueezeAttention
TEST(SqueezeAttention, ImportanceIsTheMeanCosine) {
  OwnedLayer o = zero_layer(1, 1, 4, 2);
  std::vector<float> cosine = {0.9f, 0.8f, 1.0f, 0.7f};
  LayerCapture view = o.view();
  view.attention_cosine = cosine;
  EXPECT_NEAR(squeeze_layer_importance(view), 0.85, 1e-7);
  view.attention_cosine = {};
  EXPECT_THROW(squeeze_layer_importance(view), std::invalid_argument);
}

TEST(SqueezeAttention, ExactThreeMeansInOneDimension) {
  // Sorted: 0.1 (1), 0.12 (4) | 0.5 (3), 0.52 (5) | 0.9 (0), 0.95 (2).
  const std::vector<double> c = {0.9, 0.1, 0.95, 0.5, 0.12, 0.52};
  EXPECT_EQ(squeeze_groups(c), (std::vector<int>{2, 0, 2, 1, 0, 1}));
  // {0, 1, 10, 11, 12}: {0,1}{10}{11,12} and {0,1}{10,11}{12} both have SSE 0.5 + 0 + 0.5 = 1 (and
  // beat {0}{1}{10,11,12} = 2): the first split in (i, j) order, (2, 3), wins the tie.
  const std::vector<double> d = {0, 1, 10, 11, 12};
  EXPECT_EQ(squeeze_groups(d), (std::vector<int>{0, 0, 1, 2, 2}));
  // Fewer than 3 layers: one group.
  EXPECT_EQ(squeeze_groups(std::vector<double>{0.3, 0.9}), (std::vector<int>{0, 0}));
}

TEST(SqueezeAttention, BudgetsMoveFromTheLeastImportantGroup) {
  const std::vector<int> groups = {2, 0, 2, 1, 0, 1};
  // n_kept 10, s 0.5: n₃ = 5; R = 60 − 10 = 50 over 4 layers: 12 each, the first two (layers 1, 3)
  // one more.
  EXPECT_EQ(squeeze_layer_budgets(groups, 10, 0.5, 100),
            (std::vector<std::int64_t>{5, 13, 5, 13, 12, 12}));
  // n_kept = L = 10: {5, 13, 5, 13, 12, 12} capped at 10 → {5, 10, 5, 10, 10, 10} (50), +10 to the
  // layers below the cap (0, 2): everything kept.
  EXPECT_EQ(squeeze_layer_budgets(groups, 10, 0.5, 10), std::vector<std::int64_t>(6, 10));
  // s = 0: one token per G3 layer; s = 1: no reallocation.
  EXPECT_EQ(squeeze_layer_budgets(groups, 10, 0.0, 100),
            (std::vector<std::int64_t>{1, 15, 1, 15, 14, 14}));
  EXPECT_EQ(squeeze_layer_budgets(groups, 10, 1.0, 100), std::vector<std::int64_t>(6, 10));
  // Budget 1: n₃ = max(1, 0) = 1, the rest 1 each.
  EXPECT_EQ(squeeze_layer_budgets(groups, 1, 0.5, 100), std::vector<std::int64_t>(6, 1));
  EXPECT_THROW(squeeze_layer_budgets(groups, 10, 1.5, 100), std::invalid_argument);
}

TEST(SqueezeAttention, StreamingLlmInsideEachLayer) {
  // Six layers of L = 20 with the cosines of ExactThreeMeansInOneDimension (constant per layer).
  const std::vector<float> means = {0.9f, 0.1f, 0.95f, 0.5f, 0.12f, 0.52f};
  std::vector<OwnedLayer> owned;
  std::vector<std::vector<float>> cosines;
  for (int l = 0; l < 6; ++l) {
    OwnedLayer o = zero_layer(2, 2, 20, 2);
    o.layer = l;
    o.num_layers = 6;
    owned.push_back(o);
    cosines.emplace_back(20, means[static_cast<std::size_t>(l)]);
  }
  std::vector<LayerCapture> layers;
  for (int l = 0; l < 6; ++l) {
    layers.push_back(owned[static_cast<std::size_t>(l)].view());
    layers.back().attention_cosine = cosines[static_cast<std::size_t>(l)];
  }
  const SqueezeAttentionMethod method(std::make_shared<StreamingLlmScorer>(4), 0.5);
  EXPECT_TRUE(method.needs_attention_cosine());
  EXPECT_EQ(method.name(), "squeezeattention");
  // n_kept = 10 → budgets {5, 13, 5, 13, 12, 12}: 4 sinks + the most recent n − 4.
  const Selection s = method.select(layers, budget_for_kept(20, 10), {});
  const std::vector<std::int64_t> budgets = {5, 13, 5, 13, 12, 12};
  for (std::size_t l = 0; l < 6; ++l) {
    for (std::size_t h = 0; h < 2; ++h) {
      auto expected = range(0, 4);
      const auto recent = range(static_cast<std::int32_t>(20 - (budgets[l] - 4)), 20);
      expected.insert(expected.end(), recent.begin(), recent.end());
      EXPECT_EQ(s.kept[l][h], expected) << "layer " << l;
    }
  }
  EXPECT_EQ(s.kept_entries(), 6 * 2 * 10);
  // Missing cosines: a clear error.
  layers[3].attention_cosine = {};
  EXPECT_THROW(method.select(layers, budget_for_kept(20, 10), {}), std::invalid_argument);
}

// ------------------------------------------------------------------------------ factory
TEST(LayerBudgetsFactory, BuildsBothFromTheCatalogue) {
  const MethodConfig cake{"c", "cake", "", {{"window", std::int64_t{16}}, {"tau1", 1.6}}};
  const auto built = make_method(cake);
  EXPECT_EQ(built->name(), "cake");
  EXPECT_EQ(built->window_needed(), 16);
  EXPECT_DOUBLE_EQ(std::get<CakeParams>(built->parameters()).tau1, 1.6);
  EXPECT_EQ(std::get<CakeParams>(built->parameters()).gamma, 200.0);

  const MethodConfig inner{"snap", "snapkv", "", {}};
  const MethodConfig squeeze{"sq", "squeezeattention", "", {{"scorer", std::string("snap")}}};
  const ConfigResolver resolver = [&](const std::string& name) -> const MethodConfig* {
    return name == "snap" ? &inner : nullptr;
  };
  const auto wrapped = make_method(squeeze, resolver);
  EXPECT_EQ(wrapped->name(), "squeezeattention");
  EXPECT_EQ(wrapped->window_needed(), 64);  // the wrapped SnapKV's window
  EXPECT_TRUE(wrapped->needs_attention_cosine());
  EXPECT_DOUBLE_EQ(std::get<SqueezeAttentionParams>(wrapped->parameters()).class3_share, 0.5);
  // A bad parameter is an error naming the config.
  const MethodConfig bad{"c", "cake", "", {{"window", std::int64_t{1}}}};
  EXPECT_THROW(make_method(bad), std::invalid_argument);
}

// ------------------------------------------------------------------------------ official code
const std::filesystem::path kGolden =
    std::filesystem::path(KVAUDIT_SOURCE_DIR) / "tests/golden/layer_budgets/official.json";

nlohmann::json load_golden() {
  std::ifstream in(kGolden);
  if (!in) throw std::runtime_error("cannot open " + kGolden.string());
  return nlohmann::json::parse(in);
}

TEST(LayerBudgetsGolden, CakeMatchesTheOfficialCode) {
  const auto golden = load_golden();
  ASSERT_EQ(golden["cake"].size(), 4u);
  for (const auto& c : golden["cake"]) {
    SCOPED_TRACE("cake seed " + std::to_string(c["seed"].get<int>()));
    const int n_layers = c["num_layers"], heads = c["num_heads"], kv_heads = c["num_kv_heads"];
    const int d = c["head_dim"], L = c["length"], w = c["window"], cache_size = c["cache_size"];
    std::vector<OwnedLayer> owned;
    for (int l = 0; l < n_layers; ++l) {
      const auto& g = c["layers"][static_cast<std::size_t>(l)];
      OwnedLayer o = zero_layer(kv_heads, heads, L, d);
      o.layer = l;
      o.num_layers = n_layers;
      const auto keys = g["keys"].get<std::vector<float>>();  // [Hkv, L, d]
      for (int h = 0; h < kv_heads; ++h) {
        const auto stride = static_cast<std::ptrdiff_t>(L) * d;
        o.keys[static_cast<std::size_t>(h)].assign(keys.begin() + h * stride,
                                                   keys.begin() + (h + 1) * stride);
      }
      o.bf16 = c["dtype"] == "bf16";
      o.window_rows = w;
      o.window_queries = g["window_queries"].get<std::vector<float>>();
      owned.push_back(std::move(o));
    }
    std::vector<LayerCapture> layers;
    for (const auto& o : owned) layers.push_back(o.view());
    const CakeParams params{.window = w,
                            .kernel_size = c["kernel_size"],
                            .tau1 = c["tau1"],
                            .tau2 = c["tau2"],
                            .gamma = c["gamma"]};
    // The official preferences (float32) agree with ours to float precision.
    for (int l = 0; l < n_layers; ++l) {
      const double official = c["layers"][static_cast<std::size_t>(l)]["preference"];
      EXPECT_NEAR(cake_layer_statistics(layers[static_cast<std::size_t>(l)], params).preference,
                  official, 1e-4 * std::abs(official))
          << "layer " << l;
    }
    // cache_size = the cell's n_kept per layer.
    const Selection s = CakeMethod(params).select(layers, budget_for_kept(L, cache_size), {});
    for (int l = 0; l < n_layers; ++l) {
      const auto& g = c["layers"][static_cast<std::size_t>(l)];
      for (int h = 0; h < kv_heads; ++h) {
        const auto expected = g["kept"][static_cast<std::size_t>(h)].get<std::vector<int>>();
        const auto& ours = s.kept[static_cast<std::size_t>(l)][static_cast<std::size_t>(h)];
        EXPECT_EQ(std::vector<int>(ours.begin(), ours.end()), expected)
            << "layer " << l << " head " << h << " official budget " << g["budget"];
      }
    }
  }
}

TEST(LayerBudgetsGolden, SqueezeAttentionMatchesTheOfficialCode) {
  const auto golden = load_golden();
  ASSERT_EQ(golden["squeezeattention"].size(), 2u);
  for (const auto& c : golden["squeezeattention"]) {
    SCOPED_TRACE("squeezeattention seed " + std::to_string(c["seed"].get<int>()));
    const int n_layers = c["num_layers"], heads = c["num_heads"], kv_heads = c["num_kv_heads"];
    const int L = c["length"];
    const double ini = c["ini_size"], percent = c["percent"];
    std::vector<OwnedLayer> owned;
    std::vector<std::vector<float>> cosines;
    for (int l = 0; l < n_layers; ++l) {
      OwnedLayer o = zero_layer(kv_heads, heads, L, 2);
      o.layer = l;
      o.num_layers = n_layers;
      owned.push_back(std::move(o));
      cosines.push_back(
          c["layers"][static_cast<std::size_t>(l)]["attention_cosine"].get<std::vector<float>>());
    }
    std::vector<LayerCapture> layers;
    std::vector<double> importance;
    for (int l = 0; l < n_layers; ++l) {
      layers.push_back(owned[static_cast<std::size_t>(l)].view());
      layers.back().attention_cosine = cosines[static_cast<std::size_t>(l)];
      importance.push_back(squeeze_layer_importance(layers.back()));
    }
    // Groups: the official KMeans classes (ordered by centre).
    const auto groups = squeeze_groups(importance);
    for (int l = 0; l < n_layers; ++l) {
      EXPECT_EQ(groups[static_cast<std::size_t>(l)],
                c["layers"][static_cast<std::size_t>(l)]["group"].get<int>())
          << "layer " << l;
    }
    // Budgets: the official ini_size·L per layer and KV_class3 share `percent` ↔ n_kept and
    // class3_share = percent / ini_size (these cases make the official int() exact).
    const auto n_kept = static_cast<std::int64_t>(std::lround(ini * L));
    const SqueezeAttentionMethod method(
        std::make_shared<StreamingLlmScorer>(c["start_size"].get<int>()), percent / ini);
    const Selection s = method.select(layers, budget_for_kept(L, n_kept), {});
    for (int l = 0; l < n_layers; ++l) {
      const auto& g = c["layers"][static_cast<std::size_t>(l)];
      for (int h = 0; h < kv_heads; ++h) {
        const auto expected = g["kept"][static_cast<std::size_t>(h)].get<std::vector<int>>();
        const auto& ours = s.kept[static_cast<std::size_t>(l)][static_cast<std::size_t>(h)];
        EXPECT_EQ(std::vector<int>(ours.begin(), ours.end()), expected)
            << "layer " << l << " official budget " << g["budget"];
      }
    }
    EXPECT_EQ(s.kept_entries(), static_cast<std::int64_t>(n_layers) * kv_heads * n_kept);
  }
}

}  // namespace
}  // namespace kvaudit::methods
