// HeadKV and LaCache (methods/headkv.h, methods/lacache.h; group "head_budgets", not in kvpress):
// hand-computed budgets and ladders, the head-score file checks, the edge cases, and agreement with
// the official code's selections on small inputs (tests/golden/head_budgets/*_official.json, made
// by tools/golden/head_budgets_official.py from the authors' repositories at pinned commits).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/head_scores_file.h"
#include "methods/headkv.h"
#include "methods/lacache.h"
#include "methods/method_factory.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

using nlohmann::json;
using testing::OwnedLayer;
using testing::zero_layer;

const std::string kGoldenDir = std::string(KVAUDIT_SOURCE_DIR) + "/tests/golden/head_budgets/";

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + " is missing (tools/golden/head_budgets_official.py)");
  return json::parse(in);
}

std::string parse_error(const std::string& text) {
  try {
    parse_head_scores(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::vector<std::int32_t> iota(std::int32_t first, std::int32_t last) {  // [first, last)
  std::vector<std::int32_t> out;
  for (std::int32_t j = first; j < last; ++j) out.push_back(j);
  return out;
}

std::vector<std::int32_t> concat(std::vector<std::vector<std::int32_t>> parts) {
  std::vector<std::int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// ---------------------------------------------------------------------------------------------
// The head-score file.

TEST(HeadScoresFile, ReadsTheOfficialFormatAveragingLists) {
  // Keys in any order; a list is averaged ((1+2+6)/3 = 3), a number taken as it is.
  const HeadScores s =
      parse_head_scores(R"({"1-0": [1, 2, 6], "0-1": 0.5, "0-0": [0, 0], "1-1": [4]})");
  EXPECT_EQ(s.layers, 2);
  EXPECT_EQ(s.heads, 2);
  EXPECT_EQ(s.score, (std::vector<double>{0.0, 0.5, 3.0, 4.0}));  // layer-major
  EXPECT_DOUBLE_EQ(s.at(1, 0), 3.0);
  // The committed synthetic file of the tiny models: 2 layers × 4 heads, head 0-0 scores 0,
  // 0-1 = mean(0.35, 0.7, 1.05) = 0.7.
  const HeadScores tiny = read_head_scores(kGoldenDir + "tiny_head_scores.json");
  EXPECT_EQ(tiny.layers, 2);
  EXPECT_EQ(tiny.heads, 4);
  EXPECT_DOUBLE_EQ(tiny.at(0, 0), 0.0);
  EXPECT_NEAR(tiny.at(0, 1), 0.7, 1e-12);
}

TEST(HeadScoresFile, SaysWhatIsWrong) {
  EXPECT_NE(parse_error("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error("[1, 2]").find("expected a non-empty JSON object"), std::string::npos);
  EXPECT_NE(parse_error("{}").find("expected a non-empty JSON object"), std::string::npos);
  EXPECT_NE(parse_error(R"({"0_0": 1})").find("key '0_0' is not \"<layer>-<head>\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"0--1": 1})").find("key '0--1'"), std::string::npos);
  EXPECT_NE(parse_error(R"({"0-0": -1})").find("value of '0-0' is negative"), std::string::npos);
  EXPECT_NE(parse_error(R"({"0-0": [1, -2]})").find("value of '0-0' is negative"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"0-0": 1e999})").find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error(R"({"0-0": []})").find("empty list"), std::string::npos);
  EXPECT_NE(parse_error(R"({"0-0": "high"})").find("not a number"), std::string::npos);
  EXPECT_NE(parse_error(R"({"0-0": 1, "00-0": 2})").find("head 0-0 appears twice"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"0-0": 1, "1-1": 1, "0-1": 1})").find("'1-0' is missing"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"0-0": 0, "0-1": [0, 0]})").find("every head score is 0"),
            std::string::npos);
  try {
    read_head_scores(kGoldenDir + "no_such_file.json");
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "cannot be read");
  }
}

TEST(HeadKv, TheFactoryNamesABadFileAndTheMethodAShapeMismatch) {
  const MethodConfig missing{"hk", "headkv", "", {{"head_scores", kGoldenDir + "absent.json"}}};
  try {
    make_method(missing);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("headkv: head_scores file '" + kGoldenDir +
                                         "absent.json': cannot be read"),
              std::string::npos)
        << e.what();
  }
  // The tiny file has 2 layers × 4 heads; a 1-layer, 2-head model is refused naming the file.
  const HeadKvMethod method({.head_scores = "tiny.json", .window = 1},
                            read_head_scores(kGoldenDir + "tiny_head_scores.json"));
  auto o = zero_layer(2, 2, 8, 2);
  o.window_rows = 1;
  o.window_queries.assign(2 * 2, 0.0f);
  try {
    method.select(std::vector{o.view()}, Budget{.compression = 0.5}, {});
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "headkv: head_scores file 'tiny.json' has 2 layers × 4 heads; the model has 1 "
                 "layers × 2 query heads");
  }
}

TEST(HeadKv, TheCatalogueBuildsBothMethodsWithTheirDefaults) {
  const auto headkv = make_method(
      MethodConfig{"hk", "headkv", "", {{"head_scores", kGoldenDir + "tiny_head_scores.json"}}});
  const auto& p = std::get<HeadKvParams>(headkv->parameters());
  EXPECT_EQ(p.window, 32);
  EXPECT_EQ(p.kernel_size, 7);
  EXPECT_EQ(p.pooling, Pooling::max);
  EXPECT_DOUBLE_EQ(p.beta, 1.005);
  EXPECT_DOUBLE_EQ(p.temperature, 1.0);
  EXPECT_EQ(headkv->window_needed(), 32);
  EXPECT_EQ(headkv->name(), "headkv");
  const auto lacache = make_method(MethodConfig{"la", "lacache", "", {}});
  EXPECT_EQ(std::get<LaCacheParams>(lacache->parameters()).span, 16);
  EXPECT_EQ(lacache->window_needed(), 0);
  // overlap ≥ span passes the catalogue's range (it cannot relate two parameters) but not the
  // method.
  EXPECT_THROW(make_method(MethodConfig{
                   "la", "lacache", "", {{"span", std::int64_t{2}}, {"overlap", std::int64_t{2}}}}),
               std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// HeadKV budgets.

TEST(HeadKv, PythonFloorDivisionOfFloats) {
  EXPECT_EQ(python_floor_div(96, 1.005), 95.0);  // 96 / 1.005 = 95.52
  EXPECT_EQ(python_floor_div(10, 2), 5.0);
  // Python: 1 // 0.1 == 9.0 (fmod-based), while floor(1 / 0.1) == 10.
  EXPECT_EQ(python_floor_div(1, 0.1), 9.0);
  EXPECT_EQ(std::floor(1 / 0.1), 10.0);
}

TEST(HeadKv, CapacitiesSplitAPoolByNormalisedScores) {
  // One layer, scores [1, 3], b = 10, β = 2: p = [0.25, 0.75]; f = 10 // 2 = 5, min = 5,
  // pool = 5·1·2 = 10; cap = round(2.5 + 5) = round(7.5) = 8 (half to even),
  // round(7.5 + 5) = round(12.5) = 12 (half to even). Σ = 20 = 2b.
  const HeadScores two{.layers = 1, .heads = 2, .score = {1, 3}};
  EXPECT_EQ(headkv_capacities(two, 2, 10, 2.0, 1.0), (std::vector<std::int64_t>{8, 12}));
  // T = 2: p = [1/16, 9/16] / (10/16) = [0.1, 0.9]: caps round(1 + 5) = 6, round(9 + 5) = 14.
  EXPECT_EQ(headkv_capacities(two, 2, 10, 2.0, 2.0), (std::vector<std::int64_t>{6, 14}));
  // T = 0: every (non-zero) head equal: 5 + 5 each.
  EXPECT_EQ(headkv_capacities(two, 2, 10, 2.0, 0.0), (std::vector<std::int64_t>{10, 10}));
  // β = 1: min = 0, the whole budget is pooled: caps = p · 20 = 5, 15.
  EXPECT_EQ(headkv_capacities(two, 2, 10, 1.0, 1.0), (std::vector<std::int64_t>{5, 15}));
  // GQA: 4 query heads [1, 1, 3, 3] over 2 KV heads: the group sums are again [0.25, 0.75].
  const HeadScores grouped{.layers = 1, .heads = 4, .score = {1, 1, 3, 3}};
  EXPECT_EQ(headkv_capacities(grouped, 2, 10, 2.0, 1.0), (std::vector<std::int64_t>{8, 12}));
  // Two layers share one pool: scores [0, 1 | 1, 2], b = 6, β = 1.5: p = [0, 1/4, 1/4, 1/2];
  // f = 6 // 1.5 = 4, min = 2, pool = 4·2·2 = 16: caps 2, 6, 6, 10 (Σ 24 = 4b).
  const HeadScores layers{.layers = 2, .heads = 2, .score = {0, 1, 1, 2}};
  EXPECT_EQ(headkv_capacities(layers, 2, 6, 1.5, 1.0), (std::vector<std::int64_t>{2, 6, 6, 10}));
}

// One layer, one head (MHA), L = 8, w = 1: the window query attends most to positions 2 and 5.
OwnedLayer peaked_layer(int heads) {
  auto o = zero_layer(heads, heads, 8, 2);
  for (auto& k : o.keys) {
    k[2 * 2] = 3.0f;  // key 2 = (3, 0)
    k[5 * 2] = 2.0f;  // key 5 = (2, 0)
    k[6 * 2] = 1.0f;  // key 6 = (1, 0)
  }
  o.window_rows = 1;
  o.window_queries.assign(static_cast<std::size_t>(heads) * 2, 0.0f);
  for (int h = 0; h < heads; ++h) o.window_queries[static_cast<std::size_t>(h) * 2] = 1.0f;
  return o;
}

TEST(HeadKv, EachHeadKeepsItsCapacityOfPooledWindowScoresAndTheWindow) {
  // Two heads with scores [1, 3], kernel 1 (no pooling), w = 1, L = 8, cr = 0.5: n = 4, b = 3;
  // β = 1.5: f = 3 // 1.5 = 2, min = 1, pool = 2·1·2 = 4: caps round(1 + 1) = 2,
  // round(3 + 1) = 4. Scores ∝ exp(k·q/√2): 2 > 5 > 6 > the rest (equal; torch's sort order, which
  // for fewer than 17 scores is libstdc++'s insertion sort: the lower position first).
  const HeadKvMethod method(
      {.head_scores = "x", .window = 1, .kernel_size = 1, .pooling = Pooling::max, .beta = 1.5},
      HeadScores{.layers = 1, .heads = 2, .score = {1, 3}});
  const auto o = peaked_layer(2);
  const Selection s = method.select(std::vector{o.view()}, Budget{.compression = 0.5}, {});
  EXPECT_EQ(s.kept[0][0], (std::vector<std::int32_t>{2, 5, 7}));        // cap 2 + window
  EXPECT_EQ(s.kept[0][1], (std::vector<std::int32_t>{0, 2, 5, 6, 7}));  // cap 4 + window
  // Max pooling (k = 3) spreads key 2's score to 1 and 3: head 0's top 2 become 1, 2 (ties to the
  // lower position, as above: pooled scores 1, 2, 3 all equal the peak at 2).
  const HeadKvMethod pooled(
      {.head_scores = "x", .window = 1, .kernel_size = 3, .pooling = Pooling::max, .beta = 1.5},
      HeadScores{.layers = 1, .heads = 2, .score = {1, 3}});
  EXPECT_EQ(pooled.select(std::vector{o.view()}, Budget{.compression = 0.5}, {}).kept[0][0],
            (std::vector<std::int32_t>{1, 2, 7}));
}

TEST(HeadKv, EdgeCases) {
  const HeadScores two{.layers = 1, .heads = 2, .score = {1, 3}};
  const auto o = peaked_layer(2);
  // n ≤ w (L = 8, w = 4, cr = 0.75 → n = 2): every head keeps the last n positions.
  const HeadKvMethod wide({.head_scores = "x", .window = 4, .kernel_size = 1}, two);
  auto wide_layer = o;
  wide_layer.window_rows = 4;
  wide_layer.window_queries.assign(2 * 4 * 2, 0.0f);
  const Selection recent =
      wide.select(std::vector{wide_layer.view()}, Budget{.compression = 0.75}, {});
  EXPECT_EQ(recent.kept[0][0], (std::vector<std::int32_t>{6, 7}));
  EXPECT_EQ(recent.kept[0][1], (std::vector<std::int32_t>{6, 7}));
  // Budget 1 (cr = 0.9, L = 8 → n = 1 = w): the last position.
  const HeadKvMethod narrow({.head_scores = "x", .window = 1, .kernel_size = 1}, two);
  EXPECT_EQ(narrow.select(std::vector{o.view()}, Budget{.compression = 0.9}, {}).kept[0][1],
            (std::vector<std::int32_t>{7}));
  // A capacity beyond the prefix keeps everything (cr = 0: n = 8, b = 7, β = 1.005:
  // f = 6, min = 1, pool = 12: caps round(3 + 1) = 4, round(9 + 1) = 10 ≥ 7).
  const Selection all = narrow.select(std::vector{o.view()}, Budget{.compression = 0.0}, {});
  EXPECT_EQ(all.kept[0][0].size(), 5u);
  EXPECT_EQ(all.kept[0][1], iota(0, 8));
  // L ≤ window: refused like every window method.
  auto short_layer = zero_layer(2, 2, 4, 2);
  short_layer.window_rows = 4;
  short_layer.window_queries.assign(2 * 4 * 2, 0.0f);
  EXPECT_THROW(wide.select(std::vector{short_layer.view()}, Budget{.compression = 0.5}, {}),
               std::invalid_argument);
  // Bad parameters built outside the catalogue.
  EXPECT_THROW(HeadKvMethod({.head_scores = "x", .beta = 0.5}, two), std::invalid_argument);
  EXPECT_THROW(HeadKvMethod({.head_scores = "x", .temperature = -1}, two), std::invalid_argument);
}

// The official ReasonSnapKVCluster.update_kv on random MHA inputs (2 layers × 4 heads, L = 48,
// d = 8, w = 8), 36 configurations: kept sets must be identical.
TEST(HeadKv, AgreesWithTheOfficialCode) {
  const json golden = read_json(kGoldenDir + "headkv_official.json");
  const int layers = golden.at("layers"), heads = golden.at("heads"), length = golden.at("length");
  const int dim = golden.at("head_dim"), window = golden.at("window");
  std::vector<OwnedLayer> owned;
  for (int l = 0; l < layers; ++l) {
    auto o = zero_layer(heads, heads, length, dim);
    o.layer = l;
    o.num_layers = layers;
    o.window_rows = window;
    o.window_queries.clear();
    for (int h = 0; h < heads; ++h) {
      auto& k = o.keys[static_cast<std::size_t>(h)];
      k.clear();
      for (const auto& row : golden["keys"][l][h])
        for (const auto& x : row) k.push_back(x.get<float>());
      for (const auto& row : golden["window_queries"][l][h])
        for (const auto& x : row) o.window_queries.push_back(x.get<float>());
    }
    owned.push_back(std::move(o));
  }
  std::vector<LayerCapture> views;
  for (const auto& o : owned) views.push_back(o.view());
  const HeadScores scores =
      read_head_scores(kGoldenDir + golden.at("head_scores").get<std::string>());
  int cases = 0, heads_compared = 0;
  for (const auto& c : golden.at("cases")) {
    const HeadKvMethod method({.head_scores = "tiny",
                               .window = window,
                               .kernel_size = c.at("kernel_size").get<int>(),
                               .pooling = c.at("pooling") == "max" ? Pooling::max : Pooling::avg,
                               .beta = c.at("beta").get<double>(),
                               .temperature = c.at("temperature").get<double>()},
                              scores);
    const Selection got =
        method.select(views, Budget{.compression = c.at("compression").get<double>()}, {});
    for (int l = 0; l < layers; ++l)
      for (int h = 0; h < heads; ++h) {
        EXPECT_EQ(got.kept[static_cast<std::size_t>(l)][static_cast<std::size_t>(h)],
                  c["kept"][l][h].get<std::vector<std::int32_t>>())
            << c.dump().substr(0, 120) << " layer " << l << " head " << h;
        ++heads_compared;
      }
    ++cases;
  }
  EXPECT_EQ(cases, 36);
  EXPECT_EQ(heads_compared, 36 * 8);
}

// ---------------------------------------------------------------------------------------------
// LaCache.

// Whether lacache_layer_positions throws for some layer (the official call fails as a whole).
bool any_layer_throws(std::int64_t length, int layers, std::int64_t n, const LaCacheParams& p) {
  for (int l = 0; l < layers; ++l) {
    try {
      lacache_layer_positions(length, layers, n, l, p);
    } catch (const std::invalid_argument&) {
      return true;
    }
  }
  return false;
}

TEST(LaCache, OnePassLadderHandComputed) {
  // L = 20, N = 2, C = 16, span 1, overlap 0, S = min(4, 17, 13) = 4:
  // before = 1 + ⌈1/1⌉ = 2, after = min(1, 2) = 1, red = 1, C += 1 // 2 = 0;
  // R = 4, room = 16 − 4 − 2 = 10, fits = 10 ≥ R: one pass of m = ⌈4/1⌉ = 4 steps;
  // layer i keeps [0, 4) ∪ {4 + i mod 2 + 2j : j < 4} ∪ [12, 20). (Official output, checked.)
  const LaCacheParams p{.span = 1, .overlap = 0, .max_start_size = 4};
  EXPECT_EQ(lacache_layer_positions(20, 2, 16, 0, p),
            concat({iota(0, 4), {4, 6, 8, 10}, iota(12, 20)}));
  EXPECT_EQ(lacache_layer_positions(20, 2, 16, 1, p),
            concat({iota(0, 4), {5, 7, 9, 11}, iota(12, 20)}));
}

TEST(LaCache, StartoverCompactionHandComputed) {
  // L = 20, N = 2, C = 10, span 1, overlap 0, S = min(128, 17, 7) = 7: before 2, after 1, red 1;
  // R = 10, room = 1, fits = 1 < R: startover. First pass m = 1: λ_i = [0, 7) ∪ {7 + i} ∪ [9, 20).
  // within = ((10 − 7 − 2) // 1)·1 = 1, t = ⌈9/1⌉ = 9, before' = 2 + 8·1 = 10, red' = 9,
  // m' = ⌈9/9⌉ = 1: indices [0, 7) ∪ {7 + i} ∪ [17, 19) of λ_i:
  //   layer 0: λ_0 = 0..6, 7, 9..19 → 0..6, 7, 18, 19;  layer 1: λ_1 = 0..6, 8, 9..19 → 0..6, 9,
  //   18, 19.
  const LaCacheParams p{};
  EXPECT_EQ(lacache_layer_positions(20, 2, 10, 0, {.span = 1, .overlap = 0}),
            concat({iota(0, 8), {18, 19}}));
  EXPECT_EQ(lacache_layer_positions(20, 2, 10, 1, {.span = 1, .overlap = 0}),
            concat({iota(0, 7), {9, 18, 19}}));
  EXPECT_EQ(p.span, 16);  // the official defaults
  EXPECT_EQ(p.overlap, 0);
}

TEST(LaCache, EdgeCases) {
  // L ≤ C: nothing evicted (cr = 0 keeps L).
  EXPECT_EQ(lacache_layer_positions(6, 2, 6, 1, {}), iota(0, 6));
  // span ≥ layers + overlap: a ladder step removes nothing (the official divides by zero).
  try {
    lacache_layer_positions(100, 2, 50, 0, {});  // span 16 on 2 layers
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("removes no position"), std::string::npos) << e.what();
  }
  // Budget 1 on a short prompt (L = 10, N = 2, C = 1, S = min(128, 7, −2) = −2): the official
  // list of layer 0 is [8, 6, 7, 8, 9] (negative indices count from the end): the set {6, 7, 8, 9},
  // far beyond the budget, but what the official code keeps.
  EXPECT_EQ(lacache_layer_positions(10, 2, 1, 0, {.span = 1, .overlap = 0}),
            (std::vector<std::int32_t>{6, 7, 8, 9}));
  // L = 64, 32 layers, span 16, cr = 0.75 (C = 16 < N + 2): some layer's positions leave [0, L)
  // (the official gather raises).
  EXPECT_TRUE(any_layer_throws(64, 32, 16, {}));
  EXPECT_THROW(LaCacheMethod({.span = 4, .overlap = 4}), std::invalid_argument);
  // The method: every KV head of a layer keeps the layer's ladder; layers differ.
  auto o0 = zero_layer(2, 4, 20, 2), o1 = zero_layer(2, 4, 20, 2);
  o1.layer = 1;
  const Selection s =
      LaCacheMethod({.span = 1, .overlap = 0, .max_start_size = 4})
          .select(std::vector{o0.view(), o1.view()}, Budget{.compression = 0.2}, {});
  ASSERT_EQ(s.kept.size(), 2u);
  EXPECT_EQ(s.kept[0][0], s.kept[0][1]);
  EXPECT_EQ(s.kept[0][0], concat({iota(0, 4), {4, 6, 8, 10}, iota(12, 20)}));
  EXPECT_EQ(s.kept[1][1], concat({iota(0, 4), {5, 7, 9, 11}, iota(12, 20)}));
}

// One call of the official LaCache on a fresh object for 151 configurations (layers 2 to 32):
// the same kept set per layer, or an error exactly where the official code raises.
TEST(LaCache, AgreesWithTheOfficialCode) {
  const json golden = read_json(kGoldenDir + "lacache_official.json");
  const LaCacheParams base{.max_start_size = golden.at("max_start_size").get<int>()};
  int agreed = 0, errors = 0;
  for (const auto& c : golden.at("cases")) {
    const std::int64_t length = c.at("length");
    const int layers = c.at("layers");
    const std::int64_t n = kept_count(length, c.at("compression").get<double>());
    LaCacheParams p = base;
    p.span = c.at("span");
    p.overlap = c.at("overlap");
    const std::string label = c.dump().substr(0, 100);
    if (c.contains("error")) {
      EXPECT_TRUE(any_layer_throws(length, layers, n, p))
          << label << " (official: " << c["error"] << ")";
      ++errors;
      continue;
    }
    for (int l = 0; l < layers; ++l) {
      std::vector<std::int32_t> want;
      for (const auto& run : c["kept"][l])
        for (std::int32_t j = run[0]; j <= run[1].get<std::int32_t>(); ++j) want.push_back(j);
      EXPECT_EQ(lacache_layer_positions(length, layers, n, l, p), want) << label << " layer " << l;
    }
    ++agreed;
  }
  EXPECT_EQ(agreed + errors, 151);
  EXPECT_GT(agreed, 80);
}

}  // namespace
}  // namespace kvaudit::methods
