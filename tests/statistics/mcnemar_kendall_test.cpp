// Exact McNemar and Kendall τ-b beyond the golden tables: counting from paired vectors, symmetry,
// hand-computed small cases, the undefined (constant) case and input validation.
#include <gtest/gtest.h>

#include <cmath>

#include "statistics/kendall_tau.h"
#include "statistics/mcnemar.h"
#include "base/errors.h"

namespace kvaudit::stats {
namespace {

TEST(McNemar, CountsDiscordantPairsFromVectors) {
  const std::vector<std::uint8_t> a = {1, 1, 1, 0, 0, 1, 1, 0};
  const std::vector<std::uint8_t> b = {1, 0, 0, 0, 1, 0, 1, 0};
  const McNemarResult r = exact_mcnemar(a, b);
  EXPECT_EQ(r.a_only, 3);
  EXPECT_EQ(r.b_only, 1);
  EXPECT_EQ(r.pairs, 8);
  // N = 4 discordant, n10 = 3: P{Bin(4, ½) ≥ 3} = 5/16; two-sided 2·P{≤ 1} = 10/16.
  EXPECT_DOUBLE_EQ(r.p_greater, 5.0 / 16);
  EXPECT_DOUBLE_EQ(r.p_less, 15.0 / 16);
  EXPECT_DOUBLE_EQ(r.p_two_sided, 10.0 / 16);
}

TEST(McNemar, SymmetricAndDegenerateCases) {
  const McNemarResult x = exact_mcnemar(7, 2);
  const McNemarResult y = exact_mcnemar(2, 7);
  EXPECT_DOUBLE_EQ(x.p_two_sided, y.p_two_sided);
  EXPECT_DOUBLE_EQ(x.p_greater, y.p_less);
  const McNemarResult none = exact_mcnemar(0, 0);
  EXPECT_EQ(none.p_two_sided, 1.0);
  EXPECT_EQ(none.p_greater, 1.0);
  EXPECT_EQ(exact_mcnemar(5, 5).p_two_sided, 1.0);  // capped at 1
}

TEST(McNemar, RejectsBadInput) {
  EXPECT_THROW(exact_mcnemar(-1, 2), InputError);
  EXPECT_THROW(exact_mcnemar(std::vector<std::uint8_t>{1, 0}, std::vector<std::uint8_t>{1}),
               InputError);
  EXPECT_THROW(exact_mcnemar(std::vector<std::uint8_t>{2}, std::vector<std::uint8_t>{1}),
               InputError);
}

TEST(KendallTau, HandComputedCases) {
  // x = 1..5, y = (3, 1, 2, 5, 4): C = 7, D = 3, τ = 0.4; exact p = 2·P{inv ≤ 3 | n = 5} =
  // 2·29/120.
  const KendallTauResult r = kendall_tau_b({1, 2, 3, 4, 5}, {3, 1, 2, 5, 4});
  EXPECT_EQ(r.concordant, 7);
  EXPECT_EQ(r.discordant, 3);
  EXPECT_DOUBLE_EQ(r.tau_b, 0.4);
  EXPECT_TRUE(r.exact_p);
  EXPECT_NEAR(r.p_value, 2.0 * 29 / 120, 1e-15);
  const KendallTauResult reversed = kendall_tau_b({1, 2, 3}, {3, 2, 1});
  EXPECT_DOUBLE_EQ(reversed.tau_b, -1.0);
}

TEST(KendallTau, TiesUseTheTauBDenominatorAndTheNormalApproximation) {
  // x has one tied pair: n0 = 6, n1 = 1, n2 = 0; C = 5, D = 0 → τ_b = 5/√(5·6).
  const KendallTauResult r = kendall_tau_b({1, 1, 2, 3}, {1, 2, 3, 4});
  EXPECT_EQ(r.concordant, 5);
  EXPECT_DOUBLE_EQ(r.tau_b, 5.0 / std::sqrt(30.0));
  EXPECT_FALSE(r.exact_p);
}

TEST(KendallTau, UndefinedForAConstantVariable) {
  const KendallTauResult r = kendall_tau_b({1, 1, 1}, {1, 2, 3});
  EXPECT_TRUE(std::isnan(r.tau_b));
  EXPECT_TRUE(std::isnan(r.p_value));
}

TEST(KendallTau, RejectsBadInput) {
  EXPECT_THROW(kendall_tau_b({1, 2}, {1}), InputError);
  EXPECT_THROW(kendall_tau_b({1}, {1}), InputError);
  EXPECT_THROW(kendall_tau_b({1, std::nan("")}, {1, 2}), InputError);
}

}  // namespace
}  // namespace kvaudit::stats
