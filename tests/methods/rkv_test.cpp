// R-KV (methods/rkv.h) against scores worked out by hand on 1-KV-head toys, its selection through
// ScorerMethod, the catalogue/factory entry, and the official code's kept sets on random inputs.
#include "methods/rkv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "methods/method_factory.h"
#include "methods/scorer_method.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods {
namespace {

using testing::OwnedLayer;
using testing::zero_layer;

// L = 5 candidates, d = 2, window 1 (position 4 is the window's own token). Keys:
//   k0 = (1, 0), k1 = (0, 1), k2 = (2, 0), k3 = (0, −1), k4 = (1, 1).
// One query row q = √2·(ln 2, 0) (and, for GQA, a second head q' = √2·(0, ln 4)).
OwnedLayer toy(int query_heads) {
  OwnedLayer o = zero_layer(1, query_heads, 5, 2);
  o.keys[0] = {1, 0, 0, 1, 2, 0, 0, -1, 1, 1};
  o.window_rows = 1;
  const float r2 = static_cast<float>(std::sqrt(2.0));
  o.window_queries = {r2 * static_cast<float>(std::log(2.0)), 0.0f};
  if (query_heads == 2) {
    o.window_queries.push_back(0.0f);
    o.window_queries.push_back(r2 * static_cast<float>(std::log(4.0)));
  }
  return o;
}

std::vector<float> score(const RkvParams& p, const OwnedLayer& o) {
  std::vector<float> s(static_cast<std::size_t>(o.num_kv_heads * o.length));
  RkvScorer(p).score(o.view(), {}, s);
  return s;
}

// Redundancy of the toy (shared by both tests). Unit keys k̂ = (1,0), (0,1), (1,0), (0,−1),
// (1/√2, 1/√2); cosine matrix with zero diagonal, rows i:
//   0: [0, 0, 1, 0, .7071]   last j with S > 0.5: 4 → S[0,4] = 0
//   1: [0, 0, 0, −1, .7071]  last: 4 → S[1,4] = 0
//   2: [1, 0, 0, 0, .7071]   last: 4 → S[2,4] = 0
//   3: [0, −1, 0, 0, −.7071] none → j = 0 (already 0)
//   4: [.7071, .7071, .7071, −.7071, 0]  last: 2 → S[4,2] = 0
// column sums (1.7071, −0.2929, 1, −1.7071, −0.7071), means /5 = (0.34142, −0.05858, 0.2,
// −0.34142, −0.14142); R = softmax = (0.273176, 0.183115, 0.237150, 0.138003, 0.168557).
constexpr double kR[] = {0.2731755864888103, 0.18311507171099206, 0.2371501313403524,
                         0.13800253435975132};

TEST(Rkv, ImportanceMaxPooledMinusRedundancy) {
  // Logits q·k_j/√2 over j < 4: (ln 2, 0, 2 ln 2, 0) → exp (2, 1, 4, 1)/8 = (.25, .125, .5, .125);
  // max-pool kernel 3: I = (.25, .5, .5, .5). λ = 0.5: Z = 0.5·I − 0.5·R =
  // (−0.0115878, 0.1584425, 0.1314249, 0.1809987); the window gets max + 1 = 1.1809987.
  const auto s = score({.window = 1, .kernel_size = 3, .mix_lambda = 0.5}, toy(1));
  const double I[] = {0.25, 0.5, 0.5, 0.5};
  ASSERT_EQ(s.size(), 5u);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(s[j], 0.5 * I[j] - 0.5 * kR[j], 1e-6) << j;
  EXPECT_NEAR(s[0], -0.011587793244405148, 1e-6);
  EXPECT_NEAR(s[3], 0.18099873282012435, 1e-6);
  EXPECT_NEAR(s[4], 1.1809987328201244, 1e-6);
}

TEST(Rkv, GroupTakesTheMaxOfTheLogitsBeforeTheSoftmax) {
  // Head 0 logits (ln 2, 0, 2 ln 2, 0), head 1 (0, ln 4, 0, −ln 4): their max (ln 2, 2 ln 2,
  // 2 ln 2, 0) → exp (2, 4, 4, 1)/11. Kernel 1 (no pooling), λ = 0.5:
  // Z = (2/11, 4/11, 4/11, 1/11)/2 − R/2 = (−0.0456787, 0.0902606, 0.0632431, −0.0235467).
  // (Softmax per head then mean would give a = (.205, .3825, .33, .0825) instead: head 1 alone is
  // (1, 4, 1, 1/4)/6.25.)
  const auto s = score({.window = 1, .kernel_size = 1, .mix_lambda = 0.5}, toy(2));
  const double a[] = {2.0 / 11, 4.0 / 11, 4.0 / 11, 1.0 / 11};
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(s[j], 0.5 * a[j] - 0.5 * kR[j], 1e-6) << j;
  EXPECT_NEAR(s[1], 0.09026064596268579, 1e-6);
}

TEST(Rkv, SelectionKeepsTheWindowAndTheBestScores) {
  // n_kept = max(1, floor(5·(1 − 0.4))) = 3: the window (4) and the two best of Z: 3 and 1.
  const ScorerMethod method(
      std::make_shared<RkvScorer>(RkvParams{.window = 1, .kernel_size = 3, .mix_lambda = 0.5}));
  const OwnedLayer o = toy(1);
  const LayerCapture layer = o.view();
  const Selection kept = method.select({&layer, 1}, {.compression = 0.4}, {});
  EXPECT_EQ(kept.kept.at(0).at(0), (std::vector<std::int32_t>{1, 3, 4}));
}

TEST(Rkv, FactoryBuildsItWithTheOfficialDefaultsAndRefusesBadParameters) {
  const auto method = make_method(MethodConfig{"r", "rkv", "", {}});
  const auto& p = std::get<RkvParams>(method->parameters());
  EXPECT_EQ(p.window, 8);
  EXPECT_EQ(p.kernel_size, 7);
  EXPECT_DOUBLE_EQ(p.mix_lambda, 0.07);
  EXPECT_EQ(method->window_needed(), 8);
  EXPECT_THROW(RkvScorer(RkvParams{.kernel_size = 4}), std::invalid_argument);
  // The window must be shorter than the candidates (check_window).
  EXPECT_THROW(score({.window = 5}, toy(1)), std::invalid_argument);
}

TEST(RkvOfficial, KeptSetsMatchTheOfficialCode) {
  // tests/golden/rkv/official_kept.json: R1KV.update_kv of github.com/Zefan-Cai/R-KV (d15c9767) on
  // seeded random keys (every 5th a near-copy of its predecessor) and window queries, f32
  // (tools/golden/make_rkv_golden.py). Our selection at the same budget must keep the same sets.
  const auto path =
      std::filesystem::path(KVAUDIT_SOURCE_DIR) / "tests/golden/rkv/official_kept.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing";
  const auto golden = nlohmann::json::parse(in);
  int cases = 0;
  for (const auto& c : golden.at("cases")) {
    OwnedLayer o = zero_layer(c.at("num_kv_heads").get<int>(), c.at("num_heads").get<int>(),
                              c.at("length").get<int>(), c.at("head_dim").get<int>());
    for (std::size_t g = 0; g < o.keys.size(); ++g)
      o.keys[g] = c.at("keys")[g].get<std::vector<float>>();
    o.window_rows = c.at("window").get<int>();
    for (const auto& q : c.at("queries")) {
      const auto rows = q.get<std::vector<float>>();
      o.window_queries.insert(o.window_queries.end(), rows.begin(), rows.end());
    }
    const ScorerMethod method(
        std::make_shared<RkvScorer>(RkvParams{.window = o.window_rows,
                                              .kernel_size = c.at("kernel_size").get<int>(),
                                              .mix_lambda = c.at("mix_lambda").get<double>()}));
    const int budget = c.at("budget").get<int>();
    // floor(L·(1 − cr)) = floor(budget + 0.5) = budget.
    const double cr = 1.0 - (budget + 0.5) / static_cast<double>(o.length);
    ASSERT_EQ(kept_count(o.length, cr), budget);
    const LayerCapture layer = o.view();
    const Selection kept = method.select({&layer, 1}, {.compression = cr}, {});
    const auto want = c.at("kept").get<std::vector<std::vector<std::int32_t>>>();
    EXPECT_EQ(kept.kept.at(0), want) << "case " << cases;
    ++cases;
  }
  EXPECT_EQ(cases, 3);
}

}  // namespace
}  // namespace kvaudit::methods
