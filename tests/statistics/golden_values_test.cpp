// Every golden value of tests/golden/statistics/statistics_golden.json (exact rational binomial
// tails, K*, LTT p-values, mpmath Clopper–Pearson bounds, statsmodels/scipy McNemar p-values,
// scipy Kendall τ-b) reproduced to 1e-10 relative. The number of values checked is printed.
#include <gtest/gtest.h>

#include "statistics/binomial.h"
#include "statistics/clopper_pearson.h"
#include "statistics/kendall_tau.h"
#include "statistics/mcnemar.h"
#include "tests/statistics/golden_reader.h"

namespace kvaudit::stats {
namespace {

using testing::relatively_close;
using testing::statistics_golden;
constexpr double kTolerance = 1e-10;

std::int64_t i64(const nlohmann::json& j) { return j.get<std::int64_t>(); }

TEST(Golden, RecordsItsGeneratorVersions) {
  const auto& g = statistics_golden();
  EXPECT_EQ(g.at("generator"), "tools/golden/make_statistics_golden.py");
  for (const char* key : {"python", "scipy", "statsmodels", "mpmath", "numpy"}) {
    EXPECT_TRUE(g.at("versions").contains(key)) << key;
  }
}

TEST(Golden, BinomialCdf) {
  std::size_t checked = 0;
  for (const auto& row : statistics_golden().at("binomial_cdf")) {
    const double value = binomial_cdf(i64(row["n"]), row["p"].get<double>(), i64(row["k"]));
    EXPECT_TRUE(relatively_close(value, row["cdf"].get<double>(), kTolerance)) << row.dump();
    ++checked;
  }
  std::printf("binomial_cdf: %zu values\n", checked);
  EXPECT_GT(checked, 200u);
}

TEST(Golden, BinomialUpperTail) {
  for (const auto& row : statistics_golden().at("binomial_upper_tail")) {
    const double value = binomial_upper_tail(i64(row["n"]), row["p"].get<double>(), i64(row["k"]));
    EXPECT_TRUE(relatively_close(value, row["upper_tail"].get<double>(), kTolerance)) << row.dump();
  }
}

TEST(Golden, KStarAndCap) {
  std::size_t checked = 0;
  for (const auto& row : statistics_golden().at("k_star")) {
    const std::int64_t n = i64(row["n"]);
    const auto eps = row["epsilon"].get<double>();
    EXPECT_EQ(max_certifiable_violations(n, eps, row["delta"].get<double>()), i64(row["k_star"]))
        << row.dump();
    EXPECT_EQ(violation_cap(n, eps), i64(row["cap"])) << row.dump();
    ++checked;
  }
  std::printf("k_star: %zu values\n", checked);
  EXPECT_GT(checked, 100u);
}

TEST(Golden, LttPValue) {
  for (const auto& row : statistics_golden().at("ltt_p_value")) {
    const double value = ltt_p_value(i64(row["n"]), row["epsilon"].get<double>(), i64(row["k"]));
    EXPECT_TRUE(relatively_close(value, row["p_value"].get<double>(), kTolerance)) << row.dump();
  }
}

TEST(Golden, ClopperPearsonTwoSidedWithBonferroni) {
  std::size_t checked = 0;
  for (const auto& row : statistics_golden().at("clopper_pearson_two_sided")) {
    const int m = row["m"].get<int>();
    const ProportionInterval interval = clopper_pearson_interval(
        i64(row["x"]), i64(row["n"]), row["alpha"].get<double>(), {"golden", m});
    EXPECT_TRUE(relatively_close(interval.lower, row["lower"].get<double>(), kTolerance))
        << row.dump();
    EXPECT_TRUE(relatively_close(interval.upper, row["upper"].get<double>(), kTolerance))
        << row.dump();
    EXPECT_EQ(interval.m, m);
    ++checked;
  }
  std::printf("clopper_pearson_two_sided: %zu intervals\n", checked);
  EXPECT_GT(checked, 200u);
}

TEST(Golden, ClopperPearsonOneSided) {
  for (const auto& row : statistics_golden().at("clopper_pearson_one_sided")) {
    const std::int64_t x = i64(row["x"]);
    const std::int64_t n = i64(row["n"]);
    const auto alpha = row["alpha"].get<double>();
    EXPECT_TRUE(relatively_close(clopper_pearson_lower_bound(x, n, alpha),
                                 row["lower"].get<double>(), kTolerance))
        << row.dump();
    EXPECT_TRUE(relatively_close(clopper_pearson_upper_bound(x, n, alpha),
                                 row["upper"].get<double>(), kTolerance))
        << row.dump();
  }
}

TEST(Golden, ExactMcNemar) {
  for (const auto& row : statistics_golden().at("mcnemar_exact")) {
    const McNemarResult r = exact_mcnemar(i64(row["a_only"]), i64(row["b_only"]));
    EXPECT_TRUE(relatively_close(r.p_two_sided, row["p_two_sided"].get<double>(), kTolerance))
        << row.dump();
    EXPECT_TRUE(relatively_close(r.p_greater, row["p_greater"].get<double>(), kTolerance))
        << row.dump();
    EXPECT_TRUE(relatively_close(r.p_less, row["p_less"].get<double>(), kTolerance)) << row.dump();
  }
}

TEST(Golden, KendallTauB) {
  for (const auto& row : statistics_golden().at("kendall_tau_b")) {
    const KendallTauResult r =
        kendall_tau_b(row["x"].get<std::vector<double>>(), row["y"].get<std::vector<double>>());
    EXPECT_TRUE(relatively_close(r.tau_b, row["tau_b"].get<double>(), kTolerance)) << row.dump();
    EXPECT_TRUE(relatively_close(r.p_value, row["p_value"].get<double>(), kTolerance))
        << row["name"];
  }
}

}  // namespace
}  // namespace kvaudit::stats
