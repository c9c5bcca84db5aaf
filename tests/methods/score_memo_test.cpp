// ScoreMemo (methods/score_memo.h): cells of a unit that differ only in the budget reuse their
// scorer's scores; the selections are the same as without the memo, and budget- or
// cell-dependent scorers (StreamingLLM, Random) are never shared.
#include "methods/score_memo.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "methods/knorm.h"
#include "methods/random.h"
#include "methods/scorer_method.h"
#include "methods/streaming_llm.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

testing::OwnedLayer distinct_keys(int length) {
  testing::OwnedLayer o = testing::zero_layer(2, 2, length, 2);
  for (std::size_t h = 0; h < o.keys.size(); ++h) {
    for (std::size_t i = 0; i < o.keys[h].size(); ++i) {
      o.keys[h][i] = static_cast<float>((i * 7 + h * 3) % 11) - 5.0f;
    }
  }
  return o;
}

TEST(ScoreMemo, BudgetIndependentScoresAreComputedOncePerLayerAndReused) {
  const testing::OwnedLayer owned = distinct_keys(12);
  const std::vector<LayerCapture> layers{owned.view()};
  const ScorerMethod knorm(std::make_shared<KnormScorer>());
  ScoreMemo memo;
  for (const double cr : {0.25, 0.5, 0.75}) {
    const Budget budget{.compression = cr};
    const Selection with = knorm.select(layers, budget, SelectionContext{1, 2, &memo});
    const Selection without = knorm.select(layers, budget, SelectionContext{1, 2, nullptr});
    EXPECT_EQ(with.kept, without.kept) << "cr " << cr;
  }
  EXPECT_EQ(memo.size(), 1u);  // one scorer, one layer view
}

TEST(ScoreMemo, BudgetOrCellDependentScoresAreNotShared) {
  const testing::OwnedLayer owned = distinct_keys(12);
  const std::vector<LayerCapture> layers{owned.view()};
  ScoreMemo memo;
  const ScorerMethod streaming(std::make_shared<StreamingLlmScorer>(2));
  const ScorerMethod random(std::make_shared<RandomScorer>());
  for (const double cr : {0.25, 0.75}) {
    const Budget budget{.compression = cr};
    EXPECT_EQ(streaming.select(layers, budget, SelectionContext{1, 2, &memo}).kept,
              streaming.select(layers, budget, SelectionContext{1, 2, nullptr}).kept);
  }
  for (const std::uint64_t cell : {3u, 4u}) {
    EXPECT_EQ(
        random.select(layers, Budget{.compression = 0.5}, SelectionContext{1, cell, &memo}).kept,
        random.select(layers, Budget{.compression = 0.5}, SelectionContext{1, cell, nullptr}).kept);
  }
  EXPECT_EQ(memo.size(), 0u);
}

}  // namespace
}  // namespace kvaudit::methods
