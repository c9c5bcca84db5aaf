// MergingMethod (methods/merging.h, kvpress MergingPress): the merge formula by hand on a
// 1-layer, 1-KV-head toy with 4 positions, the threshold and fraction gates (with kvpress's
// quantile quirk), the selection rule through a scorer, the edge cases, and the factory.
// Every expected number below was also printed by kvpress 0.5.5's MergingPress.merge on the same
// tensors (tools/.venv-kvpress).
#include "methods/merging.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "methods/bf16_rounding.h"
#include "methods/method_factory.h"
#include "test_capture.h"

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit::methods {
namespace {

using testing::OwnedLayer;
using testing::zero_layer;

// The toy (d = 2), kept = {0, 1} in that topk order, evicted = {2, 3}:
//   k0 = (1, 0)  v0 = (0, 3)  ‖v0‖ = 3
//   k1 = (0, 1)  v1 = (2, 0)  ‖v1‖ = 2
//   k2 = (3, 4)  v2 = (0, 2)  ‖v2‖ = 2   cos(k2, k0) = 0.6, cos(k2, k1) = 0.8 → target 1, σ = 0.8
//   k3 = (2, 0)  v3 = (6, 0)  ‖v3‖ = 6   cos(k3, k0) = 1,   cos(k3, k1) = 0   → target 0, σ = 1
// Weights: w2 = 0.8 · 2/(2 + 2 + 1e-6) ≈ 0.4,  w3 = 1 · 6/(6 + 3 + 1e-6) ≈ 2/3.
// Merged:  v1' = (v1 + 0.4 v2)/1.4 = (2, 0.8)/1.4 = (1.4285714, 0.5714286)
//          v0' = (v0 + (2/3) v3)/(5/3) = (4, 3)·0.6 = (2.4, 1.8)
const std::vector<float> kKeys = {1, 0, 0, 1, 3, 4, 2, 0};
const std::vector<float> kValues = {0, 3, 2, 0, 0, 2, 6, 0};
const std::vector<std::int64_t> kKeptRanked = {0, 1};

std::vector<ValueReplacement> merge_toy(MergeRule rule, std::vector<float> keys = kKeys) {
  return merge_evicted_values(keys, kValues, 4, 2, kKeptRanked, rule, false);
}

void expect_value(const ValueReplacement& r, int position, float x, float y) {
  EXPECT_EQ(r.position, position);
  ASSERT_EQ(r.value.size(), 2u);
  EXPECT_NEAR(r.value[0], x, 1e-6f) << "position " << position;
  EXPECT_NEAR(r.value[1], y, 1e-6f) << "position " << position;
}

TEST(Merging, DefaultMergesEveryEvictedValueIntoItsMostKeySimilarKeptEntry) {
  const auto merged = merge_toy({});
  ASSERT_EQ(merged.size(), 2u);
  expect_value(merged[0], 0, 2.4f, 1.8f);
  expect_value(merged[1], 1, 2.0f / 1.4f, 0.8f / 1.4f);
}

TEST(Merging, ThresholdGateKeepsOnlySimilarEnoughTokens) {
  // τ = 0.9: only token 3 (σ = 1) merges; v1 keeps its value (no replacement).
  const auto merged = merge_toy({.similarity_threshold = 0.9});
  ASSERT_EQ(merged.size(), 1u);
  expect_value(merged[0], 0, 2.4f, 1.8f);
  // τ = 1 still admits σ = 1 (≥), and the exact cosine of parallel keys is 1.
  EXPECT_EQ(merge_toy({.similarity_threshold = 1.0}).size(), 1u);
}

TEST(Merging, FractionGateKeepsTheMostSimilarShare) {
  // f = 0.5: θ = quantile([0.8, 1], 0.5): rank 0.5 → 0.8 + 0.5·0.2 = 0.9, so only σ = 1 merges.
  const auto merged = merge_toy({.merge_fraction = 0.5});
  ASSERT_EQ(merged.size(), 1u);
  expect_value(merged[0], 0, 2.4f, 1.8f);
  // f = 0.9: rank 0.1 → θ = 0.82, still only token 3; f = 1: no fraction gate, both merge.
  EXPECT_EQ(merge_toy({.merge_fraction = 0.9}).size(), 1u);
  EXPECT_EQ(merge_toy({.merge_fraction = 1.0}).size(), 2u);
}

TEST(Merging, FractionGateQuantileOverFailedTokensFollowsKvpress) {
  // τ = 0.9 fails token 2, so the quantile row is [−∞, 1]. q = 1 − f, rank q·1:
  //   f = 0.5: rank 0.5 → lerp weight 0.5 (large form) 1 − (1 − (−∞))·0.5 = −∞ → token 3 merges;
  //   f = 0.4: rank 0.6 → −∞ likewise;
  //   f = 0.6: rank 0.4 → small form −∞ + 0.4·∞ = NaN → σ ≥ NaN is false: NOTHING merges.
  EXPECT_EQ(merge_toy({.similarity_threshold = 0.9, .merge_fraction = 0.5}).size(), 1u);
  EXPECT_EQ(merge_toy({.similarity_threshold = 0.9, .merge_fraction = 0.4}).size(), 1u);
  EXPECT_TRUE(merge_toy({.similarity_threshold = 0.9, .merge_fraction = 0.6}).empty());
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(torch_quantile_f32({-inf, 1.0f}, 0.4)));
  EXPECT_EQ(torch_quantile_f32({-inf, 1.0f}, 0.5), -inf);
  EXPECT_TRUE(std::isnan(torch_quantile_f32({-inf, -inf, 0.5f}, 0.5)));  // rank 1: 0·(−∞ − −∞)
  // Finite rows: torch.quantile([0.1, 0.5, 0.3, 0.2], 0.6): rank 1.8 → 0.3 − 0.1·0.2 = 0.28.
  EXPECT_NEAR(torch_quantile_f32({0.1f, 0.5f, 0.3f, 0.2f}, 0.6), 0.28f, 1e-7f);
  EXPECT_FLOAT_EQ(torch_quantile_f32({0.1f, 0.5f, 0.3f, 0.2f}, 0.0), 0.1f);
}

TEST(Merging, NegativeSimilarityNeverMerges) {
  // k3 = (−1, −1): its best cosine is −0.707 < τ = 0, so only token 2 merges (into position 1).
  auto keys = kKeys;
  keys[6] = -1;
  keys[7] = -1;
  const auto merged = merge_toy({}, keys);
  ASSERT_EQ(merged.size(), 1u);
  expect_value(merged[0], 1, 2.0f / 1.4f, 0.8f / 1.4f);
}

TEST(Merging, ArgmaxTieGoesToTheFirstKeptEntryInTopkOrder) {
  // k2 = (1, 1) is equally similar to k0 and k1 (cos = 0.7071 each); k3 = (0, 0) has zero norm
  // (unit vector 0, σ = 0 with every kept key → weight 0). In topk order (1, 0) token 2 goes to
  // position 1, in order (0, 1) to position 0.
  const std::vector<float> keys = {1, 0, 0, 1, 1, 1, 0, 0};
  const std::vector<std::int64_t> order_a = {1, 0}, order_b = {0, 1};
  const auto a = merge_evicted_values(keys, kValues, 4, 2, order_a, {}, false);
  const auto b = merge_evicted_values(keys, kValues, 4, 2, order_b, {}, false);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].position, 1);
  EXPECT_EQ(b[0].position, 0);
  // w2 = 0.70710677 · 2/(2 + 3) into v0 = (0, 3): v0' = (0, 3 + 0.2828427·2)/1.2828427.
  const float w = 0.70710677f * 2.0f / 5.000001f;
  EXPECT_NEAR(b[0].value[0], 0.0f, 1e-7f);
  EXPECT_NEAR(b[0].value[1], (3.0f + 2.0f * w) / (1.0f + w), 1e-6f);
}

TEST(Merging, Bf16RoundsTheMergedValue) {
  // v1' = (1.4285714, 0.5714286) → bf16 (1.4296875, 0.5703125) (8 significant bits).
  const auto merged = merge_evicted_values(kKeys, kValues, 4, 2, kKeptRanked, {}, true);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[1].value[0], 1.4296875f);
  EXPECT_EQ(merged[1].value[1], 0.5703125f);
  EXPECT_EQ(merged[0].value[0], round_to_bf16(2.4f));
}

TEST(Merging, NothingToMergeWithoutEvictions) {
  const std::vector<std::int64_t> all = {0, 1, 2, 3};
  EXPECT_TRUE(merge_evicted_values(kKeys, kValues, 4, 2, all, {}, false).empty());
  EXPECT_THROW(
      merge_evicted_values(kKeys, kValues, 4, 2, std::vector<std::int64_t>{0, 0}, {}, false),
      std::invalid_argument);
  EXPECT_THROW(merge_evicted_values(kKeys, kValues, 3, 2, kKeptRanked, {}, false),
               std::invalid_argument);
}

// Scores from a fixed table [Hkv, L].
class TableScorer : public Scorer {
 public:
  explicit TableScorer(std::vector<float> table) : table_(std::move(table)) {}
  void score(const LayerCapture&, const SelectionContext&, std::span<float> out) const override {
    std::copy(table_.begin(), table_.end(), out.begin());
  }
  std::string name() const override { return "table"; }

 private:
  std::vector<float> table_;
};

OwnedLayer toy_layer() {
  OwnedLayer o = zero_layer(1, 1, 4, 2);
  o.keys[0] = kKeys;
  o.values[0] = kValues;
  return o;
}

TEST(Merging, MethodKeepsTheScorersTopKAndReportsTheMergedValues) {
  // Scores (0.9, 0.8, 0.1, 0.2), cr = 0.5: n_kept = floor(4·0.5) = 2 → kept {0, 1}, as the toy.
  const MergingMethod method(
      std::make_shared<TableScorer>(std::vector<float>{0.9f, 0.8f, 0.1f, 0.2f}), {});
  const OwnedLayer owned = toy_layer();
  const std::vector<LayerCapture> layers = {owned.view()};
  const Selection s = method.select(layers, {.compression = 0.5}, {});
  ASSERT_EQ(s.kept.size(), 1u);
  EXPECT_EQ(s.kept[0][0], (std::vector<std::int32_t>{0, 1}));
  ASSERT_EQ(s.value_replacements.size(), 2u);
  EXPECT_EQ(s.value_replacements[0].layer, 0);
  EXPECT_EQ(s.value_replacements[0].kv_head, 0);
  expect_value(s.value_replacements[0], 0, 2.4f, 1.8f);
  expect_value(s.value_replacements[1], 1, 2.0f / 1.4f, 0.8f / 1.4f);
  EXPECT_TRUE(s.zeroed_key_channels.empty());
  EXPECT_EQ(method.name(), "merging(table)");

  // cr = 0.75: n_kept = 1 → kept {0}; both evicted tokens merge into it:
  //   w2 = 0.6·2/(2 + 3) = 0.24, w3 = 1·6/9 = 2/3;
  //   v0' = ((0, 3) + 0.24·(0, 2) + (2/3)·(6, 0))/(1 + 0.24 + 2/3) = (4, 3.48)/1.9066667.
  const Selection one = method.select(layers, {.compression = 0.75}, {});
  EXPECT_EQ(one.kept[0][0], (std::vector<std::int32_t>{0}));
  ASSERT_EQ(one.value_replacements.size(), 1u);
  expect_value(one.value_replacements[0], 0, 4.0f / 1.9066667f, 3.48f / 1.9066667f);

  // cr = 0: everything kept, nothing merged (kvpress returns the cache untouched).
  const Selection none = method.select(layers, {.compression = 0.0}, {});
  EXPECT_EQ(none.kept[0][0].size(), 4u);
  EXPECT_TRUE(none.value_replacements.empty());
}

TEST(Merging, ConstructorRefusesOutOfRangeRules) {
  const auto scorer = std::make_shared<TableScorer>(std::vector<float>{0, 0, 0, 0});
  EXPECT_THROW(MergingMethod(scorer, {.merge_fraction = 0.0}), std::invalid_argument);
  EXPECT_THROW(MergingMethod(scorer, {.merge_fraction = 1.5}), std::invalid_argument);
  EXPECT_THROW(MergingMethod(scorer, {.similarity_threshold = -0.1}), std::invalid_argument);
  EXPECT_THROW(MergingMethod(scorer, {.similarity_threshold = 1.1}), std::invalid_argument);
  EXPECT_THROW(MergingMethod(nullptr, {}), std::invalid_argument);
}

TEST(Merging, FactoryBuildsTheWrapperWithItsParameters) {
  const MethodConfig knorm{"kn", "knorm", "", {}};
  const MethodConfig config{
      "mg",
      "merging",
      "",
      {{"scorer", std::string("kn")}, {"similarity_threshold", 0.25}, {"merge_fraction", 0.75}}};
  const auto method = make_method(config, [&](const std::string& n) -> const MethodConfig* {
    return n == "kn" ? &knorm : nullptr;
  });
  EXPECT_EQ(method->name(), "merging(knorm)");
  const auto& p = std::get<MergingParams>(method->parameters());
  EXPECT_EQ(p.scorer, "kn");
  EXPECT_DOUBLE_EQ(p.similarity_threshold, 0.25);
  EXPECT_DOUBLE_EQ(p.merge_fraction, 0.75);
  const MergingParams defaults;
  EXPECT_DOUBLE_EQ(defaults.similarity_threshold, 0.0);
  EXPECT_DOUBLE_EQ(defaults.merge_fraction, 1.0);
}

// The formula on kvpress's own merge inputs (tests/golden/kvpress/kept_merging.json "merge_inputs":
// the keys/values MergingPress.merge received in a real prefill, the kept indices in topk order and
// the rows it changed; tools/golden/kvpress_groups/merging.py), so the model's own differences are
// out of the picture. f32: the changed positions are the same and every value agrees to 1e-6
// relative (our norms and dots are accumulated in double, torch's in f32: last-bit differences).
// bf16: the changed positions are the same and the rows are equal after kvpress's bf16 rounding,
// except where a last-bit f32 difference straddles a bf16 rounding boundary (then one bf16 step).
TEST(MergingKvpress, FormulaMatchesKvpressOnItsOwnMergeInputs) {
  const auto path =
      std::filesystem::path(KVAUDIT_SOURCE_DIR) / "tests/golden/kvpress/kept_merging.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing";
  const auto golden = nlohmann::json::parse(in);
  int cases = 0;
  for (const auto& c : golden.at("cases")) {
    if (!c.contains("merge_inputs")) continue;
    ++cases;
    const bool bf16 = c.at("dtype") == "bf16";
    const auto& params = c.at("method").at("params");
    const MergeRule rule{.similarity_threshold = params.at("similarity_threshold").get<double>(),
                         .merge_fraction = params.at("merge_fraction").get<double>()};
    const auto& inputs = c.at("merge_inputs");
    double worst_relative = 0;
    int values_compared = 0, values_one_step = 0;
    for (std::size_t l = 0; l < inputs.at("keys").size(); ++l) {
      for (std::size_t h = 0; h < inputs.at("keys").at(l).size(); ++h) {
        std::vector<float> keys, values;
        for (const auto& row : inputs.at("keys").at(l).at(h))
          for (const auto& x : row) keys.push_back(x.get<float>());
        for (const auto& row : inputs.at("values").at(l).at(h))
          for (const auto& x : row) values.push_back(x.get<float>());
        const auto kept = inputs.at("kept_ranked").at(l).at(h).get<std::vector<std::int64_t>>();
        const int length = static_cast<int>(inputs.at("keys").at(l).at(h).size());
        const int d = static_cast<int>(keys.size()) / length;
        const auto ours = merge_evicted_values(keys, values, length, d, kept, rule, bf16);
        // Ours, restricted to rows that changed (a bf16 row can round back to its old value).
        std::vector<const ValueReplacement*> changed;
        for (const auto& r : ours) {
          const auto row = static_cast<std::size_t>(r.position) * static_cast<std::size_t>(d);
          if (!std::equal(r.value.begin(), r.value.end(), values.begin() + static_cast<long>(row)))
            changed.push_back(&r);
        }
        const auto want_positions = c.at("merged").at(l).at(h).get<std::vector<std::int32_t>>();
        const auto& want_rows = inputs.at("merged_values").at(l).at(h);
        ASSERT_EQ(changed.size(), want_positions.size()) << "layer " << l << " head " << h;
        for (std::size_t i = 0; i < changed.size(); ++i) {
          ASSERT_EQ(changed[i]->position, want_positions[i]) << "layer " << l << " head " << h;
          const auto want = want_rows.at(i).get<std::vector<float>>();
          double row_scale = 0;
          for (const float x : want)
            row_scale = std::max(row_scale, std::abs(static_cast<double>(x)));
          for (std::size_t m = 0; m < want.size(); ++m) {
            const float got = changed[i]->value[m];
            ++values_compared;
            if (bf16) {
              if (got == want[m]) continue;
              // one bf16 step at most: 2^-7 relative to the larger magnitude
              EXPECT_LE(std::abs(got - want[m]),
                        0x1p-7f * std::max(std::abs(got), std::abs(want[m])))
                  << "layer " << l << " head " << h << " position " << want_positions[i];
              ++values_one_step;
            } else {
              // relative to the row's largest magnitude: a merged entry can be a small
              // difference of larger terms, whose last-bit errors it inherits
              const double relative =
                  std::abs(static_cast<double>(got) - want[m]) / std::max(1e-30, row_scale);
              worst_relative = std::max(worst_relative, relative);
              EXPECT_LE(relative, 4e-7)
                  << "layer " << l << " head " << h << " position " << want_positions[i];
            }
          }
        }
      }
    }
    std::printf(
        "[merging-formula] %s %s: %d merged values, worst |ours - kvpress| / row max %.3g, "
        "one bf16 step apart %d\n",
        c.at("press").get<std::string>().c_str(), c.at("dtype").get<std::string>().c_str(),
        values_compared, worst_relative, values_one_step);
    if (bf16) {
      EXPECT_LE(values_one_step * 100, values_compared) << "more than 1% one step apart";
    }
  }
  EXPECT_EQ(cases, 4);  // merging(knorm) default and gated, f32 and bf16
}

}  // namespace
}  // namespace kvaudit::methods
