// The report: never overwrites an earlier one; identical numbers for any thread count; every file
// it promises exists (the Summary in report.md and summary.txt with the same sentences); figures
// render to valid PNG and SVG when gnuplot is present.
#include <gtest/gtest.h>

#include <set>

#include "suite/reduce/gnuplot_runner.h"
#include "suite/reduce/markdown_table.h"
#include "suite/reduce/report_markdown.h"
#include "tests/reduce/test_support.h"

namespace kvaudit::reduce::testing {
namespace {

SyntheticConfig small() {
  SyntheticConfig c;
  c.tasks = {"cwe", "niah_single_1", "vt"};
  c.instances = 16;
  c.calibration = 6;
  c.test = 6;
  c.bootstrap_resamples = 400;
  return c;
}

TEST(Report, RerunsNeverOverwriteAnEarlierReport) {
  const auto study = write_synthetic_study(fresh_test_dir(), small());
  const auto first = reduce_study(options_for(study));
  EXPECT_EQ(first.report_dir, study.results_dir / "report");
  const std::string before = read_text(first.report_dir / "report.md");
  const auto second = reduce_study(options_for(study));
  EXPECT_EQ(second.report_dir, study.results_dir / "report-2");
  EXPECT_EQ(read_text(first.report_dir / "report.md"), before);
  // No temporary directory is left behind.
  for (const auto& e : std::filesystem::directory_iterator(study.results_dir))
    EXPECT_EQ(e.path().filename().string().rfind(".report-tmp", 0), std::string::npos);
}

TEST(Report, ThreadCountDoesNotChangeANumber) {
  const auto study = write_synthetic_study(fresh_test_dir(), small());
  const auto one = reduce_study(options_for(study, false, 1));
  const auto three = reduce_study(options_for(study, false, 3));
  for (const char* table : {"protocol_gap", "protocol_gap_pooled", "baseline_wins",
                            "backend_confound", "certification", "accuracy"}) {
    const auto a = read_text(one.report_dir / "tables" / (std::string(table) + ".csv"));
    EXPECT_FALSE(a.empty()) << table;
    EXPECT_EQ(a, read_text(three.report_dir / "tables" / (std::string(table) + ".csv"))) << table;
  }
}

TEST(Report, WritesEveryPromisedFile) {
  const auto study = write_synthetic_study(fresh_test_dir(), small());
  const auto r = reduce_study(options_for(study, /*figures=*/true));
  EXPECT_TRUE(std::filesystem::is_regular_file(r.report_dir / "report.md"));
  EXPECT_TRUE(std::filesystem::is_regular_file(r.report_dir / "summary.h5"));
  for (const auto& t : r.tables) {
    EXPECT_TRUE(std::filesystem::is_regular_file(r.report_dir / "tables" / (t.id + ".csv")))
        << t.id;
    EXPECT_EQ(std::filesystem::is_regular_file(r.report_dir / "tables" / (t.id + ".tex")),
              t.write_latex)
        << t.id;
  }
  const std::string md = read_text(r.report_dir / "report.md");
  for (const char* needle : {"## Risk certification", "## Protocol gap", "family: protocol-gap",
                             "m: 60", "bootstrap_resamples: 400", "Hyndman-Fan type 7"})
    EXPECT_NE(md.find(needle), std::string::npos) << needle;
  // The Summary: after the warnings, before the analyses; the same sentences in summary.txt.
  const auto summary_at = md.find("\n## Summary\n");
  ASSERT_NE(summary_at, std::string::npos);
  EXPECT_LT(summary_at, md.find("\n## Risk certification\n"));
  const std::string txt = read_text(r.report_dir / "summary.txt");
  EXPECT_EQ(txt, summary_text(r.summary));
  ASSERT_FALSE(r.summary.empty());
  std::set<std::string> ids;
  for (const auto& s : r.summary) {
    ids.insert(s.table_id);
    EXPECT_NE(txt.find(s.text + "\n"), std::string::npos) << s.text;
    // In report.md: the sentence, a link to its table's heading and its CSV.
    const std::string line =
        "- " + markdown_escape(s.text) + " (table [" + markdown_escape(s.table_title) + "](#" +
        markdown_anchor(s.table_title) + "), [CSV](tables/" + s.table_id + ".csv))\n";
    EXPECT_NE(md.find(line, summary_at), std::string::npos) << line;
    EXPECT_NE(md.find("\n### " + s.table_title + "\n"), std::string::npos) << s.table_title;
  }
  // This study has every kind: baseline wins, protocol gaps, backend confound, certification.
  EXPECT_EQ(ids, (std::set<std::string>{"baseline_wins", "protocol_gap", "protocol_gap_pooled",
                                        "backend_confound", "certification"}));
  // (a) names exactly the methods with a baseline_wins row whose family interval lies above 0.
  const Table* wins = nullptr;
  for (const auto& t : r.tables)
    if (t.id == "baseline_wins") wins = &t;
  ASSERT_NE(wins, nullptr);
  for (const auto& s : r.summary) {
    if (s.table_id != "baseline_wins") continue;
    std::set<std::string> methods, winners;
    for (const auto& row : wins->rows) {
      const std::string protocol = std::get<std::string>(row[wins->column_index("protocol")]);
      if (s.text.rfind("Under " + protocol + ", ", 0) != 0) continue;
      const std::string method = std::get<std::string>(row[wins->column_index("method")]);
      methods.insert(method);
      const auto* lo = std::get_if<double>(&row[wins->column_index("family_lower")]);
      if (lo != nullptr && *lo > 0) winners.insert(method);
    }
    ASSERT_FALSE(methods.empty()) << s.text;
    EXPECT_TRUE(winners.count("keydiff")) << "planted: keydiff beats the baseline; " << s.text;
    for (const auto& m : methods) {
      const bool named = s.text.find(": " + m + " in ") != std::string::npos ||
                         s.text.find(", " + m + " in ") != std::string::npos ||
                         s.text.find(" and " + m + " in ") != std::string::npos;
      EXPECT_EQ(named, winners.count(m) == 1) << m << ": " << s.text;
    }
  }
  ASSERT_FALSE(r.figures.empty());
  // 2 (risk) + 2 pooled gap + 4 gap + 4 accuracy figures.
  EXPECT_EQ(r.figures.size(), 12u);
  if (!find_gnuplot()) {
    GTEST_SKIP() << "gnuplot is not installed: figures are written as scripts only (checked "
                    "above); install gnuplot-nox to check the images";
  }
  for (const auto& f : r.figures) {
    EXPECT_TRUE(f.png) << f.name << ": " << f.message;
    EXPECT_TRUE(f.svg) << f.name << ": " << f.message;
    EXPECT_NE(md.find("figures/" + f.name + ".png"), std::string::npos) << f.name;
  }
}

}  // namespace
}  // namespace kvaudit::reduce::testing
