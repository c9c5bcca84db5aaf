// DMS, prefill form (methods/dms.h): the window + threshold rule hand-checked on one table of
// scores, the bf16 cast of the threshold, NaN scores, short contexts, and the catalogue's threshold
// sign rule. With decoding = true: the window's scores handed to the decode-time part, the
// per-entry scorer requirement and the catalogue's per-entry flags.
#include "methods/dms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "methods/catalog.h"
#include "methods/knorm.h"
#include "methods/snapkv.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

using Kept = std::vector<std::vector<std::int32_t>>;
using testing::FixedScorer;
using testing::zero_layer;

// Hkv = 2, L = 6: head 0 = (−5, −1, 0.5, −3, −9, −9), head 1 = (2, −4, −4, 1, 7, −8).
const std::vector<float> kTable = {-5, -1, 0.5f, -3, -9, -9, 2, -4, -4, 1, 7, -8};

Selection select(const std::vector<float>& table, int length, int window, double threshold,
                 bool bf16 = false) {
  auto o = zero_layer(2, 2, length, 2);
  o.bf16 = bf16;
  const DmsMethod m(std::make_shared<FixedScorer>(table), window);
  return m.select(std::vector{o.view()}, {.compression = 0.9, .threshold = threshold}, {});
}

TEST(Dms, KeepsTheWindowAndEveryEarlierScoreNotBelowTheThreshold) {
  // w = 2: positions 4, 5 always kept; positions 0..3 kept when s ≥ T.
  // T = −3: head 0 keeps 1 (−1), 2 (0.5), 3 (−3: not below) + 4, 5; head 1 keeps 0 (2), 3 (1) +
  // 4, 5.
  EXPECT_EQ(select(kTable, 6, 2, -3.0).kept[0], (Kept{{1, 2, 3, 4, 5}, {0, 3, 4, 5}}));
  // T = 0.5: head 0 keeps 2 (0.5 is not below 0.5); head 1 keeps 0, 3.
  EXPECT_EQ(select(kTable, 6, 2, 0.5).kept[0], (Kept{{2, 4, 5}, {0, 3, 4, 5}}));
  // T = 100: only the window; the compression ratio of the budget plays no part.
  EXPECT_EQ(select(kTable, 6, 2, 100.0).kept[0], (Kept{{4, 5}, {4, 5}}));
  // A larger window protects more: w = 4 keeps 2..5 whatever their scores.
  EXPECT_EQ(select(kTable, 6, 4, 100.0).kept[0], (Kept{{2, 3, 4, 5}, {2, 3, 4, 5}}));
}

TEST(Dms, ContextsNotLongerThanTheWindowAreKeptWhole) {
  EXPECT_EQ(select(kTable, 6, 6, 100.0).kept[0], (Kept{{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}}));
  EXPECT_EQ(select(kTable, 6, 128, 100.0).kept[0], (Kept{{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}}));
}

TEST(Dms, NanScoresAreNotBelowAnyThreshold) {
  std::vector<float> table = kTable;
  table[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(select(table, 6, 2, 100.0).kept[0], (Kept{{0, 4, 5}, {4, 5}}));
}

// FixedScorer whose kvpress counterpart scores in the model dtype (as KVzap).
class ModelDtypeScorer : public FixedScorer {
 public:
  using FixedScorer::FixedScorer;
  bool scores_in_model_dtype() const override { return true; }
};

TEST(Dms, TheThresholdIsComparedInTheScoresDtype) {
  // T = 0.3: f32 0.3f; bf16 0.30078125. A score of 0.3f is not below 0.3f (kept in f32) but is
  // below 0.30078125: evicted for a bf16 model when the scorer's scores are bf16 (torch compares
  // bf16 scores with a Python float in bf16), kept when they are f32 (Knorm).
  std::vector<float> table(12, -100.0f);
  table[0] = 0.3f;
  EXPECT_EQ(select(table, 6, 2, 0.3, false).kept[0], (Kept{{0, 4, 5}, {4, 5}}));
  EXPECT_EQ(select(table, 6, 2, 0.3, true).kept[0], (Kept{{0, 4, 5}, {4, 5}}));
  auto o = zero_layer(2, 2, 6, 2);
  o.bf16 = true;
  const DmsMethod bf16_scores(std::make_shared<ModelDtypeScorer>(table), 2);
  EXPECT_EQ(bf16_scores.select(std::vector{o.view()}, {.threshold = 0.3}, {}).kept[0],
            (Kept{{4, 5}, {4, 5}}));
}

TEST(Dms, BadWindowsAndThresholdsAreRefused) {
  EXPECT_THROW(DmsMethod(std::make_shared<FixedScorer>(kTable), 0), std::invalid_argument);
  EXPECT_THROW(DmsMethod(nullptr, 4), std::invalid_argument);
  EXPECT_THROW(select(kTable, 6, 2, std::numeric_limits<double>::infinity()),
               std::invalid_argument);
}

// FixedScorer that says its scores are per entry (as KNorm, KVzap).
class PerEntryScorer : public FixedScorer {
 public:
  using FixedScorer::FixedScorer;
  bool per_entry() const override { return true; }
};

TEST(Dms, WithDecodingTheSelectionCarriesTheWindowsScores) {
  auto o = zero_layer(2, 2, 6, 2);
  const DmsMethod decoding(std::make_shared<PerEntryScorer>(kTable), 2, true);
  const Selection s = decoding.select(std::vector{o.view()}, {.threshold = -3.0}, {});
  // The prefill eviction is the prefill form's.
  EXPECT_EQ(s.kept[0], (Kept{{1, 2, 3, 4, 5}, {0, 3, 4, 5}}));
  // window_scores[layer][head] = the last w = 2 scores: head 0 (−9, −9), head 1 (7, −8).
  ASSERT_EQ(s.window_scores.size(), 1u);
  EXPECT_EQ(s.window_scores[0], (std::vector<std::vector<float>>{{-9, -9}, {7, -8}}));
  // L ≤ w: everything kept, every score carried (kvpress's buffer holds all L).
  const DmsMethod wide(std::make_shared<PerEntryScorer>(kTable), 8, true);
  const Selection all = wide.select(std::vector{o.view()}, {.threshold = 100.0}, {});
  EXPECT_EQ(all.kept[0], (Kept{{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}}));
  EXPECT_EQ(all.window_scores[0],
            (std::vector<std::vector<float>>{{-5, -1, 0.5f, -3, -9, -9}, {2, -4, -4, 1, 7, -8}}));
  // Without decoding nothing is carried.
  EXPECT_TRUE(select(kTable, 6, 2, -3.0).window_scores.empty());
}

TEST(Dms, DecodingNeedsAPerEntryScorer) {
  try {
    DmsMethod(std::make_shared<FixedScorer>(kTable), 2, true);
    ADD_FAILURE() << "accepted a scorer that is not per entry";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("needs a per-entry scorer (knorm, kvzap)"),
              std::string::npos)
        << error.what();
  }
  EXPECT_NO_THROW(DmsMethod(std::make_shared<KnormScorer>(), 2, true));
  EXPECT_THROW(DmsMethod(std::make_shared<SnapKvScorer>(SnapKvParams{.window = 4}), 8, true),
               std::invalid_argument);
  EXPECT_TRUE(KnormScorer().per_entry());
  EXPECT_FALSE(SnapKvScorer(SnapKvParams{.window = 4}).per_entry());
  // The catalogue (what the manifest checks at plan time) flags exactly the per-entry scorers.
  std::vector<std::string> flagged;
  for (const MethodSpec& spec : method_catalog())
    if (spec.per_entry_scorer) flagged.push_back(spec.id);
  EXPECT_EQ(flagged, (std::vector<std::string>{"knorm", "kvzap"}));
}

TEST(Dms, OnlyDmsTakesThresholdsOfAnySign) {
  for (const MethodSpec& spec : method_catalog()) {
    if (spec.axis != BudgetAxis::threshold) continue;
    EXPECT_EQ(spec.thresholds_of_any_sign, spec.id == "dms") << spec.id;
  }
  ASSERT_NE(find_method("dms"), nullptr);
  EXPECT_EQ(find_method("dms")->axis, BudgetAxis::threshold);
}

}  // namespace
}  // namespace kvaudit::methods
