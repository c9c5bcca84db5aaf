// Group "think" (ThinK, kvpress 0.5.5 ThinKPress; methods/think.h): hand-computed channel scores
// and pruned channels, the window rule (last w captured rows; all L rows when L ≤ w), bf16
// rounding points, torch's topk(largest=False) tie order, the fixed budget (ratio / 2), composed
// [scorer, think] (channels scored over the kept keys), and the catalogue / factory rules.
#include "methods/think.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <vector>

#include "methods/catalog.h"
#include "methods/composed.h"
#include "methods/method_factory.h"
#include "methods/param_lists.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

using testing::OwnedLayer;
using Channels = std::vector<std::vector<std::int32_t>>;

// One KV head, two query heads (G = 2), d = 4, L = 3, three captured window rows.
//   keys  p0 [1, 2, 0, 1]   p1 [1, 0, 2, 1]   p2 [2, 0, 1, 1]
//   k̄ = mean_j k²:  ch0 (1+1+4)/3 = 2,  ch1 (4+0+0)/3 = 4/3,  ch2 (0+4+1)/3 = 5/3,  ch3 1
//   window rows (row 0 is older than the last two):
//     head 0: r0 [0, 100, 0, 0]  r1 [1, 0, 1, 2]  r2 [1, 2, 1, 0]
//     head 1: r0 [0, 0, 0, 0]    r1 [3, 0, 1, 0]  r2 [1, 0, 1, 2]
//   window 2 (rows r1, r2): q̄ head 0 = [1, 2, 1, 2], head 1 = [5, 0, 1, 2]; group mean
//     q̄ = [3, 1, 1, 2]; score = q̄·k̄ = [6, 4/3, 5/3, 2]; lowest: ch1, then ch2, then ch3.
OwnedLayer example_layer() {
  OwnedLayer o;
  o.num_heads = 2;
  o.num_kv_heads = 1;
  o.head_dim = 4;
  o.length = 3;
  o.keys = {{1, 2, 0, 1, 1, 0, 2, 1, 2, 0, 1, 1}};
  o.values = {std::vector<float>(12, 0.0f)};
  o.window_rows = 3;
  o.window_queries = {0, 100, 0, 0, 1, 0, 1, 2, 1, 2, 1, 0,   // head 0
                      0, 0,   0, 0, 3, 0, 1, 0, 1, 0, 1, 2};  // head 1
  return o;
}

ThinkMethod think(double ratio, int window) {
  return ThinkMethod(ThinkParams{.key_channel_compression_ratio = ratio, .window_size = window});
}

TEST(Think, ChannelScoresAreWindowQueryEnergyTimesKeyEnergy) {
  const OwnedLayer o = example_layer();
  const auto scores = think_channel_scores(o.view(), 2, nullptr);
  ASSERT_EQ(scores.size(), 4u);
  EXPECT_FLOAT_EQ(scores[0], 6.0f);
  EXPECT_FLOAT_EQ(scores[1], 4.0f / 3.0f);
  EXPECT_FLOAT_EQ(scores[2], 5.0f / 3.0f);
  EXPECT_FLOAT_EQ(scores[3], 2.0f);
}

TEST(Think, PrunesTheFloorOfHeadDimTimesRatioLowestChannels) {
  const OwnedLayer o = example_layer();
  const LayerCapture layer = o.view();
  EXPECT_EQ(think(0.25, 2).zeroed_channels(layer, nullptr), (Channels{{1}}));
  EXPECT_EQ(think(0.5, 2).zeroed_channels(layer, nullptr), (Channels{{1, 2}}));
  EXPECT_EQ(think(0.7, 2).zeroed_channels(layer, nullptr), (Channels{{1, 2}}));  // int(2.8) = 2
  EXPECT_EQ(think(0.75, 2).zeroed_channels(layer, nullptr), (Channels{{1, 2, 3}}));
  EXPECT_EQ(think(0.2, 2).zeroed_channels(layer, nullptr), (Channels{{}}));  // int(0.8) = 0
  EXPECT_EQ(think(0.5, 2).pruned_channel_count(128), 64);
  EXPECT_EQ(think(0.3, 2).pruned_channel_count(128), 38);  // int(38.4)
}

TEST(Think, AWindowAtLeastLReadsEveryRow) {
  // window 32 > L = 3: kvpress's hidden_states[:, -32:] is all 3 rows, r0 included:
  //   head 0 q̄ = [2/3, 10004/3, 2/3, 4/3], head 1 = [10/3, 0, 2/3, 4/3]
  //   q̄ = [2, 5002/3, 2/3, 4/3]; score = [4, 6669.3, 10/9, 4/3] → lowest two {2, 3}.
  const OwnedLayer o = example_layer();
  const auto scores = think_channel_scores(o.view(), 32, nullptr);
  EXPECT_FLOAT_EQ(scores[0], 4.0f);
  EXPECT_FLOAT_EQ(scores[2], 10.0f / 9.0f);
  EXPECT_FLOAT_EQ(scores[3], 4.0f / 3.0f);
  EXPECT_EQ(think(0.5, 32).zeroed_channels(o.view(), nullptr), (Channels{{2, 3}}));
  EXPECT_EQ(think(0.5, 32).window_needed(), 32);
  // Fewer captured rows than min(window, L) is refused.
  OwnedLayer short_capture = example_layer();
  short_capture.window_rows = 1;
  short_capture.window_queries = {1, 2, 1, 0, 1, 0, 1, 2};
  EXPECT_THROW(think_channel_scores(short_capture.view(), 2, nullptr), std::invalid_argument);
}

TEST(Think, KeptPositionsAloneFeedTheKeyEnergy) {
  // Positions {1, 2}: k̄ = [(1+4)/2, 0, (4+1)/2, 1] = [2.5, 0, 2.5, 1];
  // score = [3·2.5, 1·0, 1·2.5, 2·1] = [7.5, 0, 2.5, 2] → lowest two {1, 3}.
  const OwnedLayer o = example_layer();
  const Channels kept = {{1, 2}};
  const auto scores = think_channel_scores(o.view(), 2, &kept);
  EXPECT_FLOAT_EQ(scores[0], 7.5f);
  EXPECT_FLOAT_EQ(scores[1], 0.0f);
  EXPECT_FLOAT_EQ(scores[2], 2.5f);
  EXPECT_FLOAT_EQ(scores[3], 2.0f);
  EXPECT_EQ(think(0.5, 2).zeroed_channels(o.view(), &kept), (Channels{{1, 3}}));
}

TEST(Think, Bf16RoundsEachMeanAndTheProduct) {
  // ch1: q̄ = 1 exactly; k̄ = 4/3 → f32 1.33333337, bf16 1.3359375 (1 + 43/128); the product keeps
  // it. ch2: k̄ = 5/3 → bf16 1.6640625 (1 + 85/128); q̄ 1.
  OwnedLayer o = example_layer();
  o.bf16 = true;
  const auto scores = think_channel_scores(o.view(), 2, nullptr);
  EXPECT_EQ(scores[1], 1.3359375f);
  EXPECT_EQ(scores[2], 1.6640625f);
  o.bf16 = false;
  EXPECT_EQ(think_channel_scores(o.view(), 2, nullptr)[1], static_cast<float>(4.0 / 3.0));
}

TEST(Think, TiesFollowTorchTopkLargestFalse) {
  // torch.tensor([1,0,1,0,2,0,1,0,0,1,3,1,0,0,1,1.]).topk(6, largest=False).indices
  //   = [1, 13, 12, 8, 7, 5] (torch 2.15 CPU): of the seven zeros, 3 is left out.
  const std::vector<float> x = {1, 0, 1, 0, 2, 0, 1, 0, 0, 1, 3, 1, 0, 0, 1, 1};
  EXPECT_EQ(lowest_channels(x, 6), (std::vector<std::int32_t>{1, 5, 7, 8, 12, 13}));
  EXPECT_EQ(lowest_channels(x, 0), (std::vector<std::int32_t>{}));
}

TEST(Think, SelectKeepsEveryPositionAndAsksForHalfTheRatio) {
  OwnedLayer first = example_layer(), second = example_layer();
  second.layer = 1;
  first.num_layers = second.num_layers = 2;
  second.keys = {{0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1}};  // ch0 of every key is 0 → pruned first
  const std::vector<LayerCapture> layers = {first.view(), second.view()};
  const ThinkMethod method = think(0.25, 2);
  EXPECT_DOUBLE_EQ(method.reported_compression(), 0.125);
  const Selection s = method.select(layers, {.compression = 0.125}, {});
  EXPECT_EQ(s.kept, (std::vector<Channels>{{{0, 1, 2}}, {{0, 1, 2}}}));
  EXPECT_EQ(s.zeroed_key_channels, (std::vector<Channels>{{{1}}, {{0}}}));
  EXPECT_THROW(method.select(layers, {.compression = 0.25}, {}), std::invalid_argument);
  EXPECT_THROW(method.select(layers, {.compression = 0.0}, {}), std::invalid_argument);
  // Ratio 0 (kvpress's default): nothing is pruned, no cache edit is asked for.
  const Selection none = think(0.0, 2).select(layers, {.compression = 0.0}, {});
  EXPECT_TRUE(none.zeroed_key_channels.empty());
  EXPECT_EQ(none.kept_entries(), 6);
  // L = 1 (a budget of one position): still all kept, one row of queries.
  OwnedLayer one = example_layer();
  one.length = 1;
  one.keys = {{1, 2, 0, 1}};
  one.values = {{0, 0, 0, 0}};
  one.window_rows = 1;
  one.window_queries = {1, 2, 1, 0, 1, 0, 1, 2};
  // q̄ = [(1+1)/2, (4+0)/2, (1+1)/2, (0+4)/2] = [1, 2, 1, 2]; k̄ = [1, 4, 0, 1]; score [1, 8, 0, 2]
  const std::vector<LayerCapture> single = {one.view()};
  const Selection s1 = think(0.5, 32).select(single, {.compression = 0.25}, {});
  EXPECT_EQ(s1.kept, (std::vector<Channels>{{{0}}}));
  EXPECT_EQ(s1.zeroed_key_channels, (std::vector<Channels>{{{0, 2}}}));
  EXPECT_THROW(think(1.0, 2), std::invalid_argument);
  EXPECT_THROW(think(0.5, 0), std::invalid_argument);
}

// s(j) = the first key component of position j (reads only keys, so it scores any subset).
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

TEST(Think, ComposedScoresTheChannelsOverThePositionsTheFirstPressKept) {
  // L = 4: keys p0 [1, 2, 0, 2]  p1 [0.5, 9, 9, 9]  p2 [2, 0, 1, 1]  p3 [0.1, 9, 9, 9].
  // first_key at ratio 0.5 keeps the two largest first components: {0, 2}.
  // k̄ over {0, 2} = [2.5, 2, 0.5, 2.5]; q̄ (the example's last two rows) = [3, 1, 1, 2];
  // score = [7.5, 2, 0.5, 5] → ThinK 0.5 prunes {1, 2}.
  // Over all four positions instead: k̄ = [1.315, 41.5, 40.75, 41.75], score = [3.945, 41.5,
  // 40.75, 83.5] → {0, 2}: the composition matters.
  OwnedLayer o = example_layer();
  o.length = 4;
  o.keys = {{1, 2, 0, 2, 0.5f, 9, 9, 9, 2, 0, 1, 1, 0.1f, 9, 9, 9}};
  o.values = {std::vector<float>(16, 0.0f)};
  const std::vector<LayerCapture> layers = {o.view()};
  const auto stage = std::make_shared<const ThinkMethod>(think(0.5, 2));
  const ComposedMethod composed({std::make_shared<FirstKeyComponent>()}, {0.5, 0.25}, stage);
  EXPECT_EQ(composed.name(), "composed(first_key, think)");
  EXPECT_EQ(composed.window_needed(), 2);
  // ComposedPress's ratio: 1 − (1 − 0.5)(1 − 0.25) = 0.625.
  const Selection s = composed.select(layers, {.compression = 0.625}, {});
  EXPECT_EQ(s.kept, (std::vector<Channels>{{{0, 2}}}));
  EXPECT_EQ(s.zeroed_key_channels, (std::vector<Channels>{{{1, 2}}}));
  EXPECT_THROW(composed.select(layers, {.compression = 0.5}, {}), std::invalid_argument);
  EXPECT_EQ(stage->select(layers, {.compression = 0.25}, {}).zeroed_key_channels,
            (std::vector<Channels>{{{0, 2}}}));
  // A first press at ratio 0 is skipped (kvpress returns the cache unchanged): all positions.
  const ComposedMethod skip({std::make_shared<FirstKeyComponent>()}, {0.0, 0.25}, stage);
  const Selection all = skip.select(layers, {.compression = 0.25}, {});
  EXPECT_EQ(all.kept, (std::vector<Channels>{{{0, 1, 2, 3}}}));
  EXPECT_EQ(all.zeroed_key_channels, (std::vector<Channels>{{{0, 2}}}));
  // The think entry of the ratios must be key_channel_compression_ratio / 2; one per stage.
  EXPECT_THROW(ComposedMethod({std::make_shared<FirstKeyComponent>()}, {0.5, 0.5}, stage),
               std::invalid_argument);
  EXPECT_THROW(ComposedMethod({std::make_shared<FirstKeyComponent>()}, {0.5}, stage),
               std::invalid_argument);
}

MethodConfig config(std::string name, std::string id, std::map<std::string, ParamValue> params) {
  return {std::move(name), std::move(id), "", std::move(params)};
}

TEST(ThinkCatalog, DefaultsRangesFactoryAndComposedStages) {
  const MethodSpec* spec = find_method("think");
  ASSERT_NE(spec, nullptr);
  EXPECT_FALSE(spec->is_scorer);
  const std::map<std::string, MethodConfig> configs = {
      {"th", config("th", "think", {{"key_channel_compression_ratio", 0.5}})},
      {"snap", config("snap", "snapkv", {{"window", std::int64_t{16}}})},
      {"knorm", config("knorm", "knorm", {})}};
  const ConfigResolver resolve = [&](const std::string& n) -> const MethodConfig* {
    const auto it = configs.find(n);
    return it == configs.end() ? nullptr : &it->second;
  };
  // kvpress defaults: ratio 0, window 32; the fixed budget is ratio / 2.
  const ResolvedMethod plain_think = resolve_method(config("t", "think", {}));
  EXPECT_EQ(std::get<ThinkParams>(plain_think.params).key_channel_compression_ratio, 0.0);
  EXPECT_EQ(std::get<ThinkParams>(plain_think.params).window_size, 32);
  const ResolvedMethod th = resolve_method(configs.at("th"), resolve);
  ASSERT_TRUE(spec->fixed_compression);
  EXPECT_DOUBLE_EQ(*spec->fixed_compression(th.params), 0.25);
  EXPECT_EQ(make_method(th)->name(), "think");
  EXPECT_EQ(make_method(th)->window_needed(), 32);
  // Ranges: ratio in [0, 1), window ≥ 1.
  EXPECT_THROW(resolve_method(config("t", "think", {{"key_channel_compression_ratio", 1.0}})),
               std::invalid_argument);
  EXPECT_THROW(resolve_method(config("t", "think", {{"key_channel_compression_ratio", -0.1}})),
               std::invalid_argument);
  EXPECT_THROW(resolve_method(config("t", "think", {{"window_size", std::int64_t{0}}})),
               std::invalid_argument);
  // composed [snapkv, think]: think last, its ratio = 0.25.
  const auto composed = make_method(config("c", "composed",
                                           {{"presses", std::string("snap,th")},
                                            {"compression_ratios", format_real_list({0.5, 0.25})}}),
                                    resolve);
  EXPECT_EQ(composed->name(), "composed(snapkv, think)");
  EXPECT_EQ(composed->window_needed(), 32);
  const ResolvedMethod rc =
      resolve_method(config("c", "composed",
                            {{"presses", std::string("snap,th")},
                             {"compression_ratios", format_real_list({0.5, 0.25})}}),
                     resolve);
  EXPECT_DOUBLE_EQ(*rc.spec->fixed_compression(rc.params), 1 - 0.5 * 0.75);
  // think not last; think's ratio not ratio / 2; think as another wrapper's scorer.
  EXPECT_THROW(make_method(config("c", "composed",
                                  {{"presses", std::string("th,snap")},
                                   {"compression_ratios", format_real_list({0.25, 0.5})}}),
                           resolve),
               std::invalid_argument);
  EXPECT_THROW(make_method(config("c", "composed",
                                  {{"presses", std::string("knorm,th")},
                                   {"compression_ratios", format_real_list({0.5, 0.5})}}),
                           resolve),
               std::invalid_argument);
  EXPECT_THROW(make_method(config("a", "adakv", {{"scorer", std::string("th")}}), resolve),
               std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::methods
