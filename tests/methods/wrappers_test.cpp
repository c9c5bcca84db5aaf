// Group "wrappers" (kvpress 0.5.5 PerLayerCompressionPress, ComposedPress, KeyRerotationPress,
// ChunkPress, EntropyGatedChunkKVPress, CriticalAdaKVPress): hand-computed selections on small
// inputs, the budget rules and edge cases, the list parameters, the catalogue's plan-time rules,
// and the re-rotated keys against kvpress's (tests/golden/kvpress/kept_wrappers.json).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "methods/catalog.h"
#include "methods/chunk.h"
#include "methods/composed.h"
#include "methods/critical_adakv.h"
#include "methods/entropy_gated_chunkkv.h"
#include "methods/key_rerotation.h"
#include "methods/method_factory.h"
#include "methods/observed_attention.h"
#include "methods/param_lists.h"
#include "methods/per_layer_compression.h"
#include "methods/snapkv.h"
#include "methods/streaming_llm.h"
#include "methods/wrapper_budgets.h"
#include "tests/methods/test_capture.h"

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit::methods {
namespace {

using testing::OwnedLayer;
using testing::zero_layer;
using Kept = std::vector<std::vector<std::int32_t>>;

// s(j) = the first key component of position j: a scorer that reads only keys, as Knorm does, and
// so scores any subset (chunk, pruned cache) by what it holds.
class FirstKeyComponent : public Scorer {
 public:
  void score(const LayerCapture& layer, const SelectionContext&,
             std::span<float> scores) const override {
    const auto L = static_cast<std::size_t>(layer.length);
    const auto d = static_cast<std::size_t>(layer.head_dim);
    for (std::size_t h = 0; h < layer.keys.size(); ++h)
      for (std::size_t j = 0; j < L; ++j) scores[h * L + j] = layer.keys[h][j * d];
  }
  std::string name() const override { return "first_key"; }
};

using testing::FixedScorer;

// One KV head, d = 2, key j = [first[j], 0] (so FirstKeyComponent scores them as given).
OwnedLayer keys_layer(const std::vector<float>& first) {
  OwnedLayer o = zero_layer(1, 1, static_cast<int>(first.size()), 2);
  for (std::size_t j = 0; j < first.size(); ++j) o.keys[0][2 * j] = first[j];
  return o;
}

// ---------------------------------------------------------------------------------------------
// List parameters.

TEST(WrappersParamLists, RealListRoundTripsAndRefusesMalformedText) {
  // std::to_chars's shortest form (fixed or scientific, whichever is shorter).
  EXPECT_EQ(format_real_list({0.25, 0.1, 1e-4}), "0.25,0.1,1e-04");
  const auto parsed = parse_real_list("0.25,0.1,1e-04");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, (std::vector<double>{0.25, 0.1, 1e-4}));
  for (const char* bad : {"", "0.5,", ",0.5", "a", "0.5;0.25", "nan", "inf", "0.5 "})
    EXPECT_FALSE(parse_real_list(bad).has_value()) << "'" << bad << "'";
  EXPECT_EQ(split_name_list("snap,knorm"), (std::vector<std::string>{"snap", "knorm"}));
  EXPECT_EQ(format_name_list({"snap", "knorm"}), "snap,knorm");
}

// ---------------------------------------------------------------------------------------------
// ChunkPress.

TEST(WrappersChunk, EachChunkKeepsItsOwnTopKWithTheFloorOfOne) {
  // L = 5, chunk_length 2, cr 0.5: chunks [0,1] [2,3] [4] keep max(1, floor(2·0.5)) = 1,
  // 1 and max(1, floor(1·0.5)) = 1: the best of each by key → 0 (5 > 1), 3 (8 > 2), 4.
  // 3 positions where the whole-layer budget would be kept_count(5, 0.5) = 2.
  const OwnedLayer layer = keys_layer({5, 1, 2, 8, 3});
  const ChunkMethod method(std::make_shared<FirstKeyComponent>(), 2);
  const std::vector<LayerCapture> layers{layer.view()};
  EXPECT_EQ(method.select(layers, {.compression = 0.5}, {}).kept[0], (Kept{{0, 3, 4}}));
  // cr 0: every position stays.
  EXPECT_EQ(method.select(layers, {.compression = 0.0}, {}).kept[0], (Kept{{0, 1, 2, 3, 4}}));
}

TEST(WrappersChunk, OneChunkIsTheScorersOwnSelection) {
  // L = 5 ≤ chunk_length 8: ScorerPress top-k with kept_count(5, 0.5) = 2 → keys 8 (3), 5 (0).
  const OwnedLayer layer = keys_layer({5, 1, 2, 8, 3});
  const ChunkMethod method(std::make_shared<FirstKeyComponent>(), 8);
  const std::vector<LayerCapture> layers{layer.view()};
  EXPECT_EQ(method.select(layers, {.compression = 0.5}, {}).kept[0], (Kept{{0, 3}}));
}

TEST(WrappersChunk, WindowScorersAreRefusedWhenThereIsMoreThanOneChunk) {
  // kvpress would rotate a non-final chunk's window queries with the sequence's last positions.
  OwnedLayer layer = zero_layer(1, 1, 8, 2);
  const ChunkMethod method(std::make_shared<SnapKvScorer>(SnapKvParams{.window = 2}), 4);
  const std::vector<LayerCapture> layers{layer.view()};
  EXPECT_THROW(method.select(layers, {.compression = 0.5}, {}), std::invalid_argument);
  EXPECT_THROW(ChunkMethod(std::make_shared<FirstKeyComponent>(), 0), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// EntropyGatedChunkKVPress.

// Token scores of three chunks of 3 (worked out by hand):
//   chunk 0 = [1, 1.5, 0.5]: mean 1,     p = [1/3, 1/2, 1/6], entropy 1.0114/ln 3 = 0.9206
//   chunk 1 = [9, 0, 0.5]:   mean 3.167, p = [0.947, 0, 0.053], entropy 0.2063/ln 3 = 0.1878
//   chunk 2 = [2, 2, 1]:     mean 1.667, p = [0.4, 0.4, 0.2],   entropy 1.0549/ln 3 = 0.9602
// Medians (torch's lower middle of 3 = the middle): mean 1.667, entropy 0.9206. Only chunk 1 is
// important (3.167 ≥ 1.667) and spiky (0.1878 < 0.9206); chunk 2's mean equals the median but its
// entropy does not fall below it. Greedy order by mean: chunk 1, chunk 2, chunk 0.
const std::vector<float> kGateScores = {1, 1.5f, 0.5f, 9, 0, 0.5f, 2, 2, 1};

TEST(WrappersEntropyGated, SpikyChunkKeepsItsBestTokensAndTheRestFollowsTheChunkOrder) {
  // Budget 5, low_entropy_chunk_length 1: chunk 1 → its best token (3), budget 4; chunk 2 whole
  // (6, 7, 8), budget 1; chunk 0 → its best token (1, score 1.5), budget 0.
  EXPECT_EQ(entropy_gated_chunk_selection(kGateScores, 5, 3, 1),
            (std::vector<std::int32_t>{1, 3, 6, 7, 8}));
}

TEST(WrappersEntropyGated, UnspentBudgetTopsUpWithTheBestRemainingTokens) {
  // Budget 8: chunk 1 → 3 (budget 7), chunk 2 → 6, 7, 8 (4), chunk 0 → 0, 1, 2 (1); top-up: the
  // better of the leftovers 4 (0) and 5 (0.5) → 5. Exactly the budget is kept.
  EXPECT_EQ(entropy_gated_chunk_selection(kGateScores, 8, 3, 1),
            (std::vector<std::int32_t>{0, 1, 2, 3, 5, 6, 7, 8}));
}

TEST(WrappersEntropyGated, MethodSumsTheHeadsAndSharesTheSetAcrossHeads) {
  // Two KV heads holding half the token scores each: the head sum is kGateScores; L = 9, cr 0.4
  // → budget floor(9·0.6) = 5 → the set of the first test, for both heads.
  std::vector<float> table;
  for (int h = 0; h < 2; ++h)
    for (const float s : kGateScores) table.push_back(s / 2);
  const EntropyGatedChunkKvMethod method(std::make_shared<FixedScorer>(table), 3, 1);
  const OwnedLayer layer = zero_layer(2, 2, 9, 2);
  const std::vector<LayerCapture> layers{layer.view()};
  const Kept expected{{1, 3, 6, 7, 8}, {1, 3, 6, 7, 8}};
  EXPECT_EQ(method.select(layers, {.compression = 0.4}, {}).kept[0], expected);
  EXPECT_THROW(EntropyGatedChunkKvMethod(std::make_shared<FixedScorer>(table), 4, 4),
               std::invalid_argument);
}

TEST(WrappersEntropyGated, BudgetOneKeepsOneToken) {
  // max(1, floor(L·(1−cr))) = 1 at cr 0.95: chunk 1 (best mean) → its best token, 3.
  EXPECT_EQ(entropy_gated_chunk_selection(kGateScores, 1, 3, 1), (std::vector<std::int32_t>{3}));
}

// ---------------------------------------------------------------------------------------------
// CriticalAdaKVPress.

TEST(WrappersCriticalAdaKv, HeadBudgetsFromTheSafeguardedLayerThenNormWeightedPerHead) {
  // Hkv = 2, L = 4, n_kept = 2 (4 entries in all), α = 0.5 → n_safe = max(1, floor(1)) = 1,
  // ε = 0, r = 0.5.
  //   s  = h0 [4, 3, 2, 1], h1 [0.5, 0.4, 0.3, 0.2]; safeguard: (h0, 0) and (h1, 0) → F.
  //   head budgets: the 4 best of the layer are F, F, 3 (h0, 1), 2 (h0, 2) → B = [3, 1].
  //   stage 1: floor(3·0.5) = 1, floor(1·0.5) = 0 → (h0, 0), already F.
  //   stage 2: n = h0 [1, 0.1, 1, 1], h1 [1, 1, 1, 1] → h0 [F, 0.3, 2, 1] keeps its 3 best:
  //   0, 2, 3 (AdaKV alone would keep 0, 1, 2); h1 keeps 0.
  const std::vector<float> scores = {4, 3, 2, 1, 0.5f, 0.4f, 0.3f, 0.2f};
  const std::vector<float> norms = {1, 0.1f, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(critical_adakv_allocate(scores, norms, 2, 4, 2, 0.5, 0.0, 0.5), (Kept{{0, 2, 3}, {0}}));
  // Stage 1 protects against the norms: r = 1 → floor(3·1) = 3 forced in h0 (0, 1, 2 by s).
  EXPECT_EQ(critical_adakv_allocate(scores, norms, 2, 4, 2, 0.5, 0.0, 1.0), (Kept{{0, 1, 2}, {0}}));
}

TEST(WrappersCriticalAdaKv, EveryHeadKeepsAtLeastItsSafeguardAndTheLayerItsTotal) {
  // h1's scores are all below h0's; α = 0.5, n_kept = 2 → n_safe 1: h1 still keeps one.
  const std::vector<float> scores = {9, 8, 7, 6, 1, 2, 3, 0};
  const std::vector<float> norms(8, 1.0f);
  const Kept kept = critical_adakv_allocate(scores, norms, 2, 4, 2, 0.5, 1e-4, 0.5);
  EXPECT_EQ(kept, (Kept{{0, 1, 2}, {2}}));
  EXPECT_THROW(CriticalAdaKvMethod(std::make_shared<FirstKeyComponent>(), 1.5, 1e-4, 0.5),
               std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// PerLayerCompressionPress.

TEST(WrappersPerLayer, EachLayerUsesItsOwnRatioAndTheCellMustAskForTheMean) {
  // Ratios [0.25, 0.75], L = 4: layer 0 keeps floor(4·0.75) = 3, layer 1 floor(4·0.25) = 1.
  OwnedLayer l0 = keys_layer({4, 1, 3, 2});
  OwnedLayer l1 = keys_layer({4, 1, 3, 2});
  l1.layer = 1;
  const std::vector<LayerCapture> layers{l0.view(), l1.view()};
  const PerLayerCompressionMethod method(std::make_shared<FirstKeyComponent>(), {0.25, 0.75});
  const Selection s = method.select(layers, {.compression = 0.5}, {});
  EXPECT_EQ(s.kept[0], (Kept{{0, 2, 3}}));
  EXPECT_EQ(s.kept[1], (Kept{{0}}));
  // The budget is fixed by the list: another cell ratio, or a list of the wrong length, throws.
  EXPECT_THROW(method.select(layers, {.compression = 0.25}, {}), std::invalid_argument);
  const PerLayerCompressionMethod three(std::make_shared<FirstKeyComponent>(), {0.5, 0.5, 0.5});
  EXPECT_THROW(three.select(layers, {.compression = 0.5}, {}), std::invalid_argument);
  // A zero ratio keeps its layer whole.
  const PerLayerCompressionMethod zero(std::make_shared<FirstKeyComponent>(), {0.0, 0.5});
  EXPECT_EQ(zero.select(layers, {.compression = 0.25}, {}).kept[0], (Kept{{0, 1, 2, 3}}));
}

// ---------------------------------------------------------------------------------------------
// ComposedPress.

TEST(WrappersComposed, TheSecondPressSeesTheCacheInTheFirstPressesScoreOrder) {
  // keys [8, 5, 1, 7, 2, 6, 4, 3]; press 1 (first key, r 0.5) keeps 4 in torch.topk order:
  // 8 (0), 7 (3), 6 (5), 5 (1) → cache [0, 3, 5, 1]. Press 2 = StreamingLLM(n_sink 1, r 0.5) on
  // that cache of 4: n_kept 2, n_pruned 2 → cache indices 0 and 3 → positions 0 and 1. (Had the
  // cache been in position order [0, 1, 3, 5], it would keep 0 and 5.)
  const OwnedLayer layer = keys_layer({8, 5, 1, 7, 2, 6, 4, 3});
  const std::vector<LayerCapture> layers{layer.view()};
  const ComposedMethod method(
      {std::make_shared<FirstKeyComponent>(), std::make_shared<StreamingLlmScorer>(1)}, {0.5, 0.5});
  // The composed ratio 1 − (1 − 0.5)(1 − 0.5) = 0.75 is the only budget.
  EXPECT_EQ(method.select(layers, {.compression = 0.75}, {}).kept[0], (Kept{{0, 1}}));
  EXPECT_THROW(method.select(layers, {.compression = 0.5}, {}), std::invalid_argument);
  // A zero ratio skips its press (kvpress returns the cache unchanged): StreamingLLM alone on
  // positions 0..7 with n_kept 4 → 0 and the last 3.
  const ComposedMethod skip(
      {std::make_shared<FirstKeyComponent>(), std::make_shared<StreamingLlmScorer>(1)}, {0.0, 0.5});
  EXPECT_EQ(skip.select(layers, {.compression = 0.5}, {}).kept[0], (Kept{{0, 5, 6, 7}}));
}

TEST(WrappersComposed, LaterPressesMustNotReadTheFullPrefillsAttention) {
  EXPECT_THROW(ComposedMethod({std::make_shared<FirstKeyComponent>(),
                               std::make_shared<ObservedAttentionScorer>()},
                              {0.5, 0.5}),
               std::invalid_argument);
  EXPECT_NO_THROW(ComposedMethod(
      {std::make_shared<ObservedAttentionScorer>(), std::make_shared<FirstKeyComponent>()},
      {0.5, 0.5}));
  EXPECT_THROW(ComposedMethod({std::make_shared<FirstKeyComponent>()}, {0.5, 0.5}),
               std::invalid_argument);
  EXPECT_DOUBLE_EQ(composed_compression({0.5, 0.5}), 0.75);
  EXPECT_DOUBLE_EQ(mean_compression({0.25, 0.75}), 0.5);
}

// ---------------------------------------------------------------------------------------------
// KeyRerotationPress.

TEST(WrappersKeyRerotation, KeysAreRotatedBackByTheirPositionShift) {
  // d = 2, θ = [1]: the row at cache index 0 came from position 2 (δ = −2), k = [1, 0] →
  // [cos(−2), sin(−2)] = [cos 2, −sin 2]; index 1 from position 5 (δ = −4), k = [0, 1] →
  // [0·cos − 1·sin(−4), 1·cos(−4)] = [sin 4, cos 4].
  const std::vector<float> keys = {1, 0, 0, 1};
  const std::vector<std::int32_t> positions = {2, 5};
  const std::vector<float> inv_freq = {1.0f};
  const auto out = rerotate_keys(keys, positions, inv_freq, 2, false);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_NEAR(out[0], std::cos(2.0), 1e-6);
  EXPECT_NEAR(out[1], -std::sin(2.0), 1e-6);
  EXPECT_NEAR(out[2], std::sin(4.0), 1e-6);
  EXPECT_NEAR(out[3], std::cos(4.0), 1e-6);
  // A key already at its cache index (δ = 0) is unchanged.
  const auto same =
      rerotate_keys(keys, std::vector<std::int32_t>{0, 1}, std::vector<float>{0.0f}, 2, false);
  EXPECT_EQ(same, keys);
}

TEST(WrappersKeyRerotation, KeptSetIsTheInnerScorerPresses) {
  // ScorerPress top-k of the scorer: kept_count(5, 0.5) = 2 → keys 8 (3) and 5 (0).
  const OwnedLayer layer = keys_layer({5, 1, 2, 8, 3});
  const std::vector<LayerCapture> layers{layer.view()};
  const KeyRerotationMethod method(std::make_shared<FirstKeyComponent>());
  EXPECT_EQ(method.select(layers, {.compression = 0.5}, {}).kept[0], (Kept{{0, 3}}));
}

// kvpress's rerotate_keys on the tiny models (the golden's query-agnostic
// key_rerotation(streaming_llm) cases at cr 0.75): our rerotate_keys on kvpress's own inputs (kept
// rows, sorted positions, the module's inv_freq) against its output. f32: torch's vectorised
// cos/sin differ from libm by an ulp or so; bf16: each product and the sum are rounded to bf16,
// so one rounding step of difference is allowed.
TEST(WrappersKeyRerotation, MatchesKvpressRerotatedKeysOnTheTinyModels) {
  const std::filesystem::path golden =
      std::filesystem::path(KVAUDIT_SOURCE_DIR) / "tests/golden/kvpress/kept_wrappers.json";
  ASSERT_TRUE(std::filesystem::exists(golden)) << golden;
  std::ifstream in(golden);
  const auto doc = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& c : doc.at("cases")) {
    if (!c.contains("rerotation")) continue;
    const auto& r = c.at("rerotation");
    const bool bf16 = c.at("dtype") == "bf16";
    double worst = 0;
    for (std::size_t l = 0; l < r.at("positions").size(); ++l) {
      const auto inv_freq = r.at("inv_freq").at(l).get<std::vector<float>>();
      const int d = static_cast<int>(inv_freq.size() * 2);
      for (std::size_t h = 0; h < r.at("positions").at(l).size(); ++h) {
        const auto positions = r.at("positions").at(l).at(h).get<std::vector<std::int32_t>>();
        std::vector<float> kept, want;
        for (const auto& row : r.at("kept_keys").at(l).at(h))
          for (const float x : row.get<std::vector<float>>()) kept.push_back(x);
        for (const auto& row : r.at("rerotated_keys").at(l).at(h))
          for (const float x : row.get<std::vector<float>>()) want.push_back(x);
        const auto got = rerotate_keys(kept, positions, inv_freq, d, bf16);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          const double tolerance = bf16 ? 1e-2 * std::abs(want[i]) + 1e-2 : 1e-5;
          EXPECT_NEAR(got[i], want[i], tolerance)
              << c.at("model") << "/" << c.at("dtype") << " layer " << l << " head " << h
              << " entry " << i;
          worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
        }
      }
    }
    std::printf("[rerotation] %s/%s: max |ours - kvpress| = %.3g\n",
                c.at("model").get<std::string>().c_str(), c.at("dtype").get<std::string>().c_str(),
                worst);
    ++checked;
  }
  EXPECT_EQ(checked, 6) << "the golden should carry one re-rotation per prompt";
}

// ---------------------------------------------------------------------------------------------
// Catalogue: list parameters, parameters that must fit together, fixed budgets.

MethodConfig config(std::string name, std::string id, std::map<std::string, ParamValue> params) {
  return {std::move(name), std::move(id), "", std::move(params)};
}

TEST(WrappersCatalog, ComposedResolvesItsPressesInOrderAndChecksTheRatioCount) {
  const std::map<std::string, MethodConfig> configs = {
      {"snap", config("snap", "snapkv", {{"window", std::int64_t{16}}})},
      {"knorm", config("knorm", "knorm", {})},
      {"ada", config("ada", "adakv", {{"scorer", std::string("snap")}})}};
  const ConfigResolver resolve = [&](const std::string& n) -> const MethodConfig* {
    const auto it = configs.find(n);
    return it == configs.end() ? nullptr : &it->second;
  };
  const ResolvedMethod r =
      resolve_method(config("c", "composed",
                            {{"presses", std::string("knorm,snap")},
                             {"compression_ratios", format_real_list({0.5, 0.25})}}),
                     resolve);
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.stages[0]->spec->id, "knorm");
  EXPECT_EQ(r.stages[1]->spec->id, "snapkv");
  EXPECT_EQ(std::get<ComposedParams>(r.params).compression_ratios,
            (std::vector<double>{0.5, 0.25}));
  ASSERT_TRUE(r.spec->fixed_compression);
  EXPECT_DOUBLE_EQ(*r.spec->fixed_compression(r.params), 1 - 0.5 * 0.75);
  ASSERT_TRUE(observation_window(r).has_value());
  EXPECT_EQ(observation_window(r)->size, 16);  // the window of its snapkv press
  EXPECT_EQ(make_method(r)->name(), "composed(knorm, snapkv)");
  // One ratio for two presses; a press that is not a scorer; an unknown press.
  EXPECT_THROW(resolve_method(config("c", "composed",
                                     {{"presses", std::string("knorm,snap")},
                                      {"compression_ratios", std::string("0.5")}}),
                              resolve),
               std::invalid_argument);
  EXPECT_THROW(resolve_method(config("c", "composed",
                                     {{"presses", std::string("knorm,ada")},
                                      {"compression_ratios", std::string("0.5,0.5")}}),
                              resolve),
               std::invalid_argument);
  EXPECT_THROW(resolve_method(config("c", "composed",
                                     {{"presses", std::string("knorm,nope")},
                                      {"compression_ratios", std::string("0.5,0.5")}}),
                              resolve),
               std::invalid_argument);
}

TEST(WrappersCatalog, RatioListsAreBoundedAndEntropyGateLengthsMustFit) {
  const std::map<std::string, MethodConfig> configs = {{"knorm", config("knorm", "knorm", {})}};
  const ConfigResolver resolve = [&](const std::string& n) -> const MethodConfig* {
    const auto it = configs.find(n);
    return it == configs.end() ? nullptr : &it->second;
  };
  const auto per_layer = [&](std::string ratios) {
    return resolve_method(
        config("p", "per_layer_compression",
               {{"scorer", std::string("knorm")}, {"compression_ratios", std::move(ratios)}}),
        resolve);
  };
  EXPECT_EQ(std::get<PerLayerCompressionParams>(per_layer("0.25,0.75").params).compression_ratios,
            (std::vector<double>{0.25, 0.75}));
  EXPECT_DOUBLE_EQ(
      *find_method("per_layer_compression")->fixed_compression(per_layer("0.25,0.75").params), 0.5);
  EXPECT_THROW(per_layer("0.5,1"), std::invalid_argument);     // 1 is outside [0, 1)
  EXPECT_THROW(per_layer("-0.1"), std::invalid_argument);      // below 0
  EXPECT_THROW(per_layer("0.5,,0.5"), std::invalid_argument);  // not a list of numbers
  const auto gated = [&](std::int64_t chunk, std::int64_t low) {
    return resolve_method(config("e", "entropy_gated_chunkkv",
                                 {{"scorer", std::string("knorm")},
                                  {"chunk_length", chunk},
                                  {"low_entropy_chunk_length", low}}),
                          resolve);
  };
  EXPECT_NO_THROW(gated(5, 4));
  EXPECT_THROW(gated(4, 4), std::invalid_argument);
  // The defaults are kvpress's.
  const auto chunk = std::get<ChunkParams>(
      resolve_method(config("c", "chunk", {{"scorer", std::string("knorm")}}), resolve).params);
  EXPECT_EQ(chunk.chunk_length, 1024);
  const auto critical = std::get<CriticalAdaKvParams>(
      resolve_method(config("c", "critical_adakv", {{"scorer", std::string("knorm")}}), resolve)
          .params);
  EXPECT_DOUBLE_EQ(critical.alpha, 0.2);
  EXPECT_DOUBLE_EQ(critical.epsilon, 1e-4);
  EXPECT_DOUBLE_EQ(critical.first_stage_ratio, 0.5);
}

}  // namespace
}  // namespace kvaudit::methods
