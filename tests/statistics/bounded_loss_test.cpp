// Hoeffding–Bentkus p-values and the WSR betting bound (statistics/bounded_loss.h) against the
// golden file tests/golden/statistics/risk_control_golden.json
// (tools/golden/make_risk_control_golden.py):
//  * HB: mpmath (60 digits) of the LTT formula, to 1e-9 relative everywhere; MAPIE 1.6's
//    compute_hoeffding_bentkus_p_value to 1e-9 relative wherever its np.ceil(n·r̂) gives the same
//    count (the rows where it lands one above, r̂ = K/n not exact in double, are counted);
//  * WSR: confseq 0.0.11's betting_mart at exact points (p-values and log-capital, 1e-9 relative),
//    the root of its capital found with brentq (xtol 1e-14; checked to 1e-10 absolute), confseq's
//    betting_cs grid (its stated resolution 1/breaks) and MAPIE's get_r_hat_plus grid (resolution
//    0.005) where MAPIE's two-halves split does not change a decision — and below the exact bound
//    where it does (MAPIE's split is not the WSR capital).
// Plus properties: HB ≥ the exact binomial p for 0/1 losses (K* 44 vs 47 at n = 1200,
// ε = δ = 0.05), monotonicity, the bound/p-value duality, input errors.
#include "statistics/bounded_loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/errors.h"
#include "statistics/binomial.h"
#include "tests/statistics/golden_reader.h"
#include "tests/statistics/risk_control_golden.h"

namespace kvaudit::stats {
namespace {

using testing::relatively_close;
using testing::risk_control_golden;

std::vector<double> losses_of(const nlohmann::json& row) {
  return row.at("losses").get<std::vector<double>>();
}

TEST(RiskControlGolden, RecordsPackagesAndVersions) {
  const auto& g = risk_control_golden();
  EXPECT_EQ(g.at("generator"), "tools/golden/make_risk_control_golden.py");
  for (const char* key : {"python", "numpy", "scipy", "mpmath", "mapie", "confseq"}) {
    EXPECT_TRUE(g.at("versions").contains(key)) << key;
  }
  for (const char* key : {"hoeffding_bentkus", "wsr", "procedures", "power", "sample_size"}) {
    EXPECT_TRUE(g.at("sources").contains(key)) << key;
  }
}

TEST(BoundedLoss, HoeffdingBentkusMatchesMpmathAndMapie) {
  std::size_t checked = 0;
  std::size_t mapie_checked = 0;
  std::size_t mapie_ceil_differs = 0;
  for (const auto& row : risk_control_golden().at("hoeffding_bentkus")) {
    const double r_hat = row.at("r_hat").get<double>();
    const auto n = row.at("n").get<std::int64_t>();
    const double alpha = row.at("alpha").get<double>();
    const double expected = row.at("p_value").get<double>();
    const double p = hoeffding_bentkus_p_value(r_hat, n, alpha);
    if (expected > 1e-290) {
      EXPECT_TRUE(relatively_close(p, expected, 1e-9)) << row.dump();
      EXPECT_TRUE(relatively_close(hoeffding_p_value(r_hat, n, alpha),
                                   row.at("hoeffding").get<double>(), 1e-9))
          << row.dump();
    } else {
      EXPECT_LE(p, 1e-290) << row.dump();  // below what a double holds relatively
    }
    if (row.at("bentkus").get<double>() > 1e-290) {
      EXPECT_TRUE(
          relatively_close(bentkus_p_value(r_hat, n, alpha), row.at("bentkus").get<double>(), 1e-9))
          << row.dump();
    }
    if (row.at("mapie_agrees").get<bool>()) {
      if (expected > 1e-290) {
        EXPECT_TRUE(relatively_close(p, row.at("p_value_mapie").get<double>(), 1e-9)) << row.dump();
        ++mapie_checked;
      }
    } else {
      // MAPIE's count is one above ours: its p can only be larger.
      EXPECT_EQ(row.at("k_mapie").get<std::int64_t>(), row.at("k_exact").get<std::int64_t>() + 1);
      EXPECT_GE(row.at("p_value_mapie").get<double>(), p * (1 - 1e-12)) << row.dump();
      ++mapie_ceil_differs;
    }
    ++checked;
  }
  std::printf(
      "hoeffding_bentkus: %zu values (mpmath), %zu also MAPIE, %zu where MAPIE's ceil "
      "lands one above\n",
      checked, mapie_checked, mapie_ceil_differs);
  EXPECT_GT(checked, 300u);
  EXPECT_GT(mapie_checked, 250u);
}

TEST(BoundedLoss, HoeffdingBentkusIsWeakerThanTheExactBinomialForZeroOneLosses) {
  // For 0/1 losses the exact tail P{Bin(n, ε) ≤ K} ≤ e·P{...} and ≤ the Chernoff bound p^H.
  constexpr std::int64_t kN = 1200;
  std::int64_t hb_k_star = -1;
  for (std::int64_t k = 0; k < violation_cap(kN, 0.05); ++k) {
    const double r_hat = static_cast<double>(k) / static_cast<double>(kN);
    const double hb = hoeffding_bentkus_p_value(r_hat, kN, 0.05);
    // (At K = 0 both are (1 − ε)^n: equal up to rounding.)
    EXPECT_GE(hb, ltt_p_value(kN, 0.05, k) * (1 - 1e-12)) << k;
    if (hb <= 0.05) hb_k_star = k;
  }
  EXPECT_EQ(hb_k_star, 44);  // docs/design/statistics.md §Validity of the p-value
  EXPECT_EQ(max_certifiable_violations(kN, 0.05, 0.05), 47);
}

TEST(BoundedLoss, HoeffdingBentkusIsMonotoneAndAtMostOne) {
  for (const std::int64_t n : {1, 5, 100, 2000}) {
    for (const double alpha : {0.01, 0.1, 0.5, 0.9}) {
      double previous = 0.0;
      for (int i = 0; i <= 200; ++i) {
        const double r_hat = i / 200.0;
        const double p = hoeffding_bentkus_p_value(r_hat, n, alpha);
        EXPECT_GE(p, previous) << n << " " << alpha << " " << r_hat;
        EXPECT_LE(p, 1.0);
        previous = p;
      }
      EXPECT_EQ(hoeffding_bentkus_p_value(1.0, n, alpha), 1.0);  // r̂ ≥ α: p^H = 1
    }
  }
}

TEST(BoundedLoss, BentkusCountIsTheCountForZeroOneMeans) {
  // 7/100 · 100 = 7.000000000000001 in double: the count stays 7 (MAPIE's np.ceil gives 8).
  const double r_hat = 7.0 / 100.0;
  ASSERT_GT(100.0 * r_hat, 7.0);
  EXPECT_TRUE(relatively_close(bentkus_p_value(r_hat, 100, 0.2),
                               std::exp(1.0) * binomial_cdf(100, 0.2, 7), 1e-14));
}

TEST(BoundedLoss, WsrMatchesConfseqAndMapie) {
  std::size_t bounds = 0;
  std::size_t p_values = 0;
  std::size_t mapie_grid = 0;
  std::size_t mapie_split = 0;
  for (const auto& row : risk_control_golden().at("wsr")) {
    const auto losses = losses_of(row);
    const double delta = row.at("delta").get<double>();
    const double u = wsr_upper_bound(losses, delta);
    const double exact = row.at("upper_bound_confseq_brentq").get<double>();
    EXPECT_NEAR(u, exact, 1e-10) << row.at("name") << " delta " << delta;
    // confseq's grid: the largest grid point in the set plus 1/breaks.
    const double grid = row.at("upper_bound_confseq_grid").get<double>();
    const double step = 1.0 / row.at("confseq_breaks").get<double>();
    EXPECT_LE(u, grid + 1e-12) << row.at("name");
    EXPECT_GE(u, grid - step - 1e-12) << row.at("name");
    // MAPIE: the smallest grid point whose (split) capital exceeds 1/δ.
    const double mapie = row.at("upper_bound_mapie_grid").get<double>();
    const double mapie_step = row.at("mapie_grid_step").get<double>();
    if (row.at("mapie_split_decides_differently_at").empty()) {
      EXPECT_LE(u, mapie + 1e-12) << row.at("name");
      EXPECT_GT(u, mapie - mapie_step - 1e-12) << row.at("name");
      ++mapie_grid;
    } else {
      // The sum of the two halves' maxima overstates the capital here: MAPIE's bound is lower.
      EXPECT_LT(mapie, u) << row.at("name");
      std::printf("  %s delta %.2f: MAPIE %.4f below the WSR bound %.6f (two-halves split)\n",
                  row.at("name").get<std::string>().c_str(), delta, mapie, u);
      ++mapie_split;
    }
    ++bounds;
    for (const auto& p_row : row.at("p_values")) {
      const double alpha = p_row.at("alpha").get<double>();
      const double bet_delta = p_row.at("bet_delta").get<double>();
      EXPECT_TRUE(relatively_close(wsr_p_value(losses, alpha, bet_delta),
                                   p_row.at("p_value").get<double>(), 1e-9))
          << row.at("name") << " " << p_row.dump();
      const double log_capital = p_row.at("log_capital").get<double>();
      EXPECT_NEAR(wsr_log_capital(losses, alpha, bet_delta), log_capital,
                  1e-9 * std::max(1.0, std::fabs(log_capital)))
          << row.at("name") << " " << p_row.dump();
      ++p_values;
    }
  }
  std::printf(
      "wsr: %zu bounds (confseq brentq and grid), %zu within MAPIE's grid, %zu where "
      "MAPIE's split binds; %zu p-values (confseq)\n",
      bounds, mapie_grid, mapie_split, p_values);
  EXPECT_GE(bounds, 10u);
  EXPECT_GE(mapie_grid, 6u);
  EXPECT_GE(p_values, 60u);
}

TEST(BoundedLoss, WsrBoundAndPValueAreDual) {
  for (const auto& row : risk_control_golden().at("wsr")) {
    const auto losses = losses_of(row);
    const double delta = row.at("delta").get<double>();
    const double u = wsr_upper_bound(losses, delta);
    if (u >= 1.0) {
      EXPECT_GT(wsr_p_value(losses, 1.0 - 1e-9, delta), delta) << row.at("name");
      continue;
    }
    // p(α) ≤ δ exactly when u(δ) ≤ α (bets tuned at δ): u is the first α that certifies.
    EXPECT_LE(wsr_p_value(losses, u, delta), delta) << row.at("name");
    EXPECT_GT(wsr_p_value(losses, std::nextafter(u, 0.0), delta), delta) << row.at("name");
    EXPECT_GE(u, mean_loss(losses, "golden")) << row.at("name");
  }
}

TEST(BoundedLoss, MeanLossAndJointPValue) {
  EXPECT_DOUBLE_EQ(mean_loss({0.0, 0.5, 1.0, 0.25}, "column"), 0.4375);
  EXPECT_EQ(joint_p_value({0.01, 0.2, 0.03}), 0.2);
  EXPECT_EQ(joint_p_value({0.04}), 0.04);
}

template <typename F>
void expect_input_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no InputError (wanted one mentioning '" << needle << "')";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(BoundedLoss, RefusesBadInput) {
  expect_input_error([] { hoeffding_bentkus_p_value(-0.1, 10, 0.1); }, "r_hat");
  expect_input_error([] { hoeffding_bentkus_p_value(1.5, 10, 0.1); }, "r_hat");
  expect_input_error([] { hoeffding_bentkus_p_value(std::nan(""), 10, 0.1); }, "r_hat");
  expect_input_error([] { hoeffding_bentkus_p_value(0.1, 0, 0.1); }, "n must be");
  expect_input_error([] { hoeffding_bentkus_p_value(0.1, 10, 0.0); }, "alpha");
  expect_input_error([] { hoeffding_bentkus_p_value(0.1, 10, 1.0); }, "alpha");
  expect_input_error([] { wsr_upper_bound({}, 0.1); }, "no losses");
  expect_input_error([] { wsr_upper_bound({0.1, 1.2}, 0.1); }, "loss 1 is 1.2");
  expect_input_error([] { wsr_upper_bound({0.1, std::nan("")}, 0.1); }, "loss 1");
  expect_input_error([] { wsr_upper_bound({0.1}, 1.0); }, "delta");
  expect_input_error([] { wsr_p_value({0.1}, 0.0); }, "alpha");
  expect_input_error([] { wsr_p_value({0.1}, 0.1, 0.0); }, "bet_delta");
  expect_input_error(
      [] {
        mean_loss({0.2, -0.5}, "snapkv@0.5 calibration");
      },
      "snapkv@0.5 calibration: loss 1 is -0.5");
  expect_input_error([] { mean_loss({}, "empty column"); }, "empty column");
  expect_input_error([] { joint_p_value({}); }, "no per-risk");
  expect_input_error([] { joint_p_value({0.1, 1.5}); }, "p-value 1");
}

}  // namespace
}  // namespace kvaudit::stats
