// The report's cost section (suite/reduce/cost_analysis.h, pareto_front.h, cost_figures.h): the
// Pareto front by hand on five points with ties and duplicates; the cost table's means and fronts
// on a synthetic study whose records carry costs (numbers worked out from synthetic_cell_costs);
// its figures render; and a study whose records carry none (as shards of schema version < 5) gets
// the section's explanation instead of numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "suite/reduce/cost_analysis.h"
#include "suite/reduce/gnuplot_runner.h"
#include "suite/reduce/pareto_front.h"
#include "tests/reduce/test_support.h"

namespace kvaudit::reduce::testing {
namespace {

TEST(ParetoFront, FivePointsWithTiesAndDuplicatesByHand) {
  // (cost, accuracy):
  //   0 (1, 0.5)  the cheapest: on the front whatever its accuracy
  //   1 (2, 0.5)  dominated by 0 (costs more, no more accurate)
  //   2 (2, 0.7)  the best of cost 2 and better than anything cheaper: on
  //   3 (3, 0.7)  dominated by 2 (and 4): same accuracy, costs more
  //   4 (2, 0.7)  a duplicate of 2: neither dominates the other, both on
  const std::vector<ParetoPoint> points{{1, 0.5}, {2, 0.5}, {2, 0.7}, {3, 0.7}, {2, 0.7}};
  EXPECT_EQ(pareto_front(points), (std::vector<bool>{true, false, true, false, true}));
  // A more accurate and costlier point joins the front; one that is worse on both does not.
  const std::vector<ParetoPoint> more{{1, 0.5}, {4, 0.9}, {5, 0.8}, {0.5, 0.4}};
  EXPECT_EQ(pareto_front(more), (std::vector<bool>{true, true, false, true}));
  // NaN coordinates are never on the front and dominate nothing.
  const std::vector<ParetoPoint> nan{{std::nan(""), 1.0}, {2, std::nan("")}, {3, 0.1}};
  EXPECT_EQ(pareto_front(nan), (std::vector<bool>{false, false, true}));
  EXPECT_TRUE(pareto_front({}).empty());
}

SyntheticConfig small_with_costs(bool costs) {
  SyntheticConfig c;
  c.tasks = {"cwe", "niah_single_1"};
  c.instances = 10;
  c.calibration = 4;
  c.test = 4;
  c.bootstrap_resamples = 200;
  c.costs = costs;
  return c;
}

TEST(CostSection, MeansAndFrontsFromTheRecords) {
  const auto study = write_synthetic_study(fresh_test_dir(), small_with_costs(true));
  const auto r = reduce_study(options_for(study));
  ASSERT_TRUE(r.costs.has_costs());
  EXPECT_EQ(r.costs.costed_cells, r.costs.ok_cells);
  const Table* table = nullptr;
  for (const auto& t : r.tables)
    if (t.id == "cost") table = &t;
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->rows.size(), r.costs.rows.size());
  std::size_t fronts = 0;
  for (const CostRow& row : r.costs.rows) {
    if (row.n == 0) continue;
    const bool full = row.method < 0;
    const double retention = full ? 1.0 : 1.0 - r.frame->budgets[row.budget].nominal_compression;
    // synthetic_cell_costs: 2 + 0.5 + 0.1·(method + 1) + 0.2 + 1 + (1 + 5·retention) ms for an
    // evicting cell; 2 + 0.2 + 1 + (1 + 5) = 9.2 ms for full KV.
    const double want = full ? 9.2 : 2 + 0.5 + 0.1 * (row.method + 1) + 0.2 + 1 + 1 + 5 * retention;
    EXPECT_NEAR(row.total_ms, want, 1e-9) << row.method << " " << row.budget;
    EXPECT_NEAR(row.step_ms[0], 2.0, 1e-12);
    EXPECT_NEAR(row.peak_kv_bytes, row.kept_bytes + 4096, 1e-6);
    EXPECT_EQ(row.devices, "cpu");
    EXPECT_EQ(row.threads, "4");
    EXPECT_EQ(shared_cost_names(row.shared_costs),
              full ? "prefill+feed+decode" : "prefill+capture+feed+decode");
    fronts += row.front_bytes ? 1 : 0;
  }
  EXPECT_GT(fronts, 0u);
  const std::string md = read_text(r.report_dir / "report.md");
  EXPECT_NE(md.find("## Cost"), std::string::npos);
  EXPECT_NE(md.find("tables/cost.csv"), std::string::npos);
  const std::string csv = read_text(r.report_dir / "tables" / "cost.csv");
  EXPECT_NE(csv.find("front_bytes"), std::string::npos);
  EXPECT_NE(csv.find("time_ms"), std::string::npos);
}

TEST(CostSection, FrontsAreParetoFrontsOfTheirPanel) {
  const auto study = write_synthetic_study(fresh_test_dir(), small_with_costs(true));
  const auto r = reduce_study(options_for(study));
  // Brute force: a row is on the front iff no row of its panel dominates it.
  for (const CostRow& a : r.costs.rows) {
    bool bytes_dominated = false, time_dominated = false;
    for (const CostRow& b : r.costs.rows) {
      if (a.model != b.model || a.backend != b.backend || a.benchmark != b.benchmark ||
          a.protocol != b.protocol)
        continue;
      const auto dominates = [](double cost_b, double acc_b, double cost_a, double acc_a) {
        return cost_b <= cost_a && acc_b >= acc_a && (cost_b < cost_a || acc_b > acc_a);
      };
      bytes_dominated =
          bytes_dominated || dominates(b.kept_bytes, b.accuracy, a.kept_bytes, a.accuracy);
      time_dominated = time_dominated || dominates(b.total_ms, b.accuracy, a.total_ms, a.accuracy);
    }
    EXPECT_EQ(a.front_bytes, !bytes_dominated && !std::isnan(a.accuracy));
    EXPECT_EQ(a.front_time, !time_dominated && !std::isnan(a.accuracy));
  }
}

TEST(CostSection, FiguresRender) {
  const auto study = write_synthetic_study(fresh_test_dir(), small_with_costs(true));
  const auto r = reduce_study(options_for(study, /*figures=*/true));
  std::size_t cost_figures = 0;
  for (const auto& f : r.figures) {
    if (f.name.rfind("cost_", 0) != 0) continue;
    ++cost_figures;
    if (find_gnuplot()) {
      EXPECT_TRUE(f.png) << f.name << ": " << f.message;
      EXPECT_TRUE(f.svg) << f.name << ": " << f.message;
    }
  }
  // bytes and time per (benchmark, backend, model): 1 benchmark × 2 backends × 2 models.
  EXPECT_EQ(cost_figures, 2u * 1 * 2 * 2);
  const std::string md = read_text(r.report_dir / "report.md");
  EXPECT_NE(md.find("figures/cost_bytes_"), std::string::npos);
  if (!find_gnuplot()) GTEST_SKIP() << "gnuplot is not installed: the images were not checked";
}

TEST(CostSection, RecordsWithoutCostsGetAnExplanationNotNumbers) {
  const auto study = write_synthetic_study(fresh_test_dir(), small_with_costs(false));
  const auto r = reduce_study(options_for(study, /*figures=*/true));
  EXPECT_FALSE(r.costs.has_costs());
  EXPECT_GT(r.costs.ok_cells, 0);
  for (const auto& t : r.tables) EXPECT_NE(t.id, "cost");
  for (const auto& f : r.figures) EXPECT_NE(f.name.rfind("cost_", 0), 0u) << f.name;
  const std::string md = read_text(r.report_dir / "report.md");
  const auto section = md.find("## Cost");
  ASSERT_NE(section, std::string::npos);
  EXPECT_NE(md.find("The records carry no costs", section), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(r.report_dir / "tables" / "cost.csv"));
}

}  // namespace
}  // namespace kvaudit::reduce::testing
