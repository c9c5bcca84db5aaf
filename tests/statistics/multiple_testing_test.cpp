// The multiple-testing procedures (statistics/multiple_testing.h): rejections equal MAPIE 1.6's
// control_fwer / FWERFixedSequenceTesting(n_starts) on the golden p-value vectors
// (tests/golden/statistics/risk_control_golden.json, values exactly at the levels included), plus
// hand-worked examples, the levels and `tested` flags, parsing and input errors.
#include "statistics/multiple_testing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/errors.h"
#include "tests/statistics/risk_control_golden.h"

namespace kvaudit::stats {
namespace {

using testing::risk_control_golden;

std::vector<std::size_t> rejected_indices(const ProcedureResult& r) {
  std::vector<std::size_t> out;
  for (std::size_t j = 0; j < r.rejected.size(); ++j) {
    if (r.rejected[j]) out.push_back(j);
  }
  return out;
}

TEST(MultipleTesting, MatchesMapieControlFwer) {
  std::size_t checked = 0;
  for (const auto& row : risk_control_golden().at("procedures")) {
    const auto p = row.at("p_values").get<std::vector<double>>();
    const double delta = row.at("delta").get<double>();
    const auto want = [&](const char* key) { return row.at(key).get<std::vector<std::size_t>>(); };
    EXPECT_EQ(rejected_indices(apply_procedure(TestingProcedure::fixed_sequence, p, delta)),
              want("fixed_sequence"))
        << row.dump();
    EXPECT_EQ(rejected_indices(apply_procedure(TestingProcedure::bonferroni, p, delta)),
              want("bonferroni"))
        << row.dump();
    EXPECT_EQ(rejected_indices(apply_procedure(TestingProcedure::holm, p, delta)), want("holm"))
        << row.dump();
    checked += 3;
    for (const auto& [starts, rejected] : row.at("multistart").items()) {
      const auto s = static_cast<std::size_t>(std::stoul(starts));
      EXPECT_EQ(rejected_indices(
                    apply_procedure(TestingProcedure::fixed_sequence_multistart, p, delta, s)),
                rejected.get<std::vector<std::size_t>>())
          << "starts " << s << " " << row.dump();
      ++checked;
    }
  }
  std::printf("procedures: %zu rejection sets equal MAPIE's\n", checked);
  EXPECT_GT(checked, 200u);
}

TEST(MultipleTesting, HandWorkedExample) {
  // J = 6, δ = 0.06: the list is not monotone (candidate 2 is unsafe-looking).
  const std::vector<double> p = {0.001, 0.5, 0.004, 0.009, 0.019, 0.011};
  const double delta = 0.06;
  const auto fs = apply_procedure(TestingProcedure::fixed_sequence, p, delta);
  EXPECT_EQ(rejected_indices(fs), (std::vector<std::size_t>{0}));
  EXPECT_EQ(fs.tested, (std::vector<bool>{true, true, false, false, false, false}));
  // Multistart S = 3: starts 0, 2, 4 at level 0.02: [0], [2, 3, 4, 5].
  const auto ms = apply_procedure(TestingProcedure::fixed_sequence_multistart, p, delta, 3);
  EXPECT_EQ(ms.starts, (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_EQ(rejected_indices(ms), (std::vector<std::size_t>{0, 2, 3, 4, 5}));
  for (const double level : ms.level) EXPECT_DOUBLE_EQ(level, 0.02);
  // Bonferroni at 0.01: 0, 2, 3.
  EXPECT_EQ(rejected_indices(apply_procedure(TestingProcedure::bonferroni, p, delta)),
            (std::vector<std::size_t>{0, 2, 3}));
  // Holm: 0.001 ≤ 0.01, 0.004 ≤ 0.012, 0.009 ≤ 0.015, 0.011 ≤ 0.02, 0.019 ≤ 0.03, 0.5 > 0.06.
  const auto holm = apply_procedure(TestingProcedure::holm, p, delta);
  EXPECT_EQ(rejected_indices(holm), (std::vector<std::size_t>{0, 2, 3, 4, 5}));
  EXPECT_DOUBLE_EQ(holm.level[1], 0.06);
  EXPECT_DOUBLE_EQ(holm.level[0], 0.01);
  EXPECT_TRUE(holm.tested[1]);
}

TEST(MultipleTesting, InclusiveComparisonsAndStartPositions) {
  EXPECT_TRUE(apply_procedure(TestingProcedure::fixed_sequence, {0.05}, 0.05).rejected[0]);
  EXPECT_TRUE(apply_procedure(TestingProcedure::bonferroni, {0.025, 1.0}, 0.05).rejected[0]);
  EXPECT_EQ(multistart_positions(10, 3), (std::vector<std::size_t>{0, 3, 6}));
  EXPECT_EQ(multistart_positions(7, 7), (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(multistart_positions(5, 1), (std::vector<std::size_t>{0}));
  // S = 1 is the fixed sequence; S = J rejects what Bonferroni rejects.
  const std::vector<double> p = {0.01, 0.2, 0.004, 0.03, 0.001};
  EXPECT_EQ(apply_procedure(TestingProcedure::fixed_sequence_multistart, p, 0.1, 1).rejected,
            apply_procedure(TestingProcedure::fixed_sequence, p, 0.1).rejected);
  EXPECT_EQ(apply_procedure(TestingProcedure::fixed_sequence_multistart, p, 0.1, 5).rejected,
            apply_procedure(TestingProcedure::bonferroni, p, 0.1).rejected);
}

TEST(MultipleTesting, ParsesNamesAndRefusesBadInput) {
  for (const auto procedure :
       {TestingProcedure::fixed_sequence, TestingProcedure::fixed_sequence_multistart,
        TestingProcedure::bonferroni, TestingProcedure::holm}) {
    EXPECT_EQ(parse_testing_procedure(to_string(procedure), "x"), procedure);
  }
  try {
    parse_testing_procedure("hochberg", "manifest.toml: certification 'c': procedure");
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("manifest.toml: certification 'c': procedure"), std::string::npos);
    EXPECT_NE(what.find("'hochberg'"), std::string::npos);
    EXPECT_NE(what.find("holm"), std::string::npos);
  }
  EXPECT_THROW(apply_procedure(TestingProcedure::holm, {}, 0.05), InputError);
  EXPECT_THROW(apply_procedure(TestingProcedure::holm, {0.1}, 0.0), InputError);
  EXPECT_THROW(apply_procedure(TestingProcedure::holm, {0.1, 1.5}, 0.05), InputError);
  EXPECT_THROW(apply_procedure(TestingProcedure::holm, {0.1, std::nan("")}, 0.05), InputError);
  EXPECT_THROW(apply_procedure(TestingProcedure::fixed_sequence_multistart, {0.1, 0.2}, 0.05, 0),
               InputError);
  EXPECT_THROW(apply_procedure(TestingProcedure::fixed_sequence_multistart, {0.1, 0.2}, 0.05, 3),
               InputError);
}

}  // namespace
}  // namespace kvaudit::stats
