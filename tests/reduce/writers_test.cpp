// The table writers and interval helpers on hand-made inputs: CSV quoting, LaTeX escaping and
// booktabs layout, Markdown partial markers, number formats, Hoeffding's interval, families.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "suite/reduce/accuracy.h"
#include "suite/reduce/csv_writer.h"
#include "suite/reduce/families.h"
#include "suite/reduce/latex_writer.h"
#include "suite/reduce/markdown_table.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {
namespace {

Table sample() {
  Table t;
  t.id = "sample";
  t.title = "Δ per method_name & 50% budget";
  t.description = "d";
  t.add_column("method", ColumnType::text);
  t.add_column("n", ColumnType::integer);
  t.add_column("delta", ColumnType::real, 3, true, "Δ");
  t.add_column("p", ColumnType::pvalue);
  t.add_column("note", ColumnType::text, 0, false);
  t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
  t.rows.push_back({std::string("streaming_llm"), std::int64_t{650}, -0.0661, 2.5e-6,
                    std::string("a, \"quoted\" note"), false});
  t.rows.push_back(
      {std::string("h2o#1 {x}"), std::int64_t{0}, Value{}, 0.5, std::string(""), true});
  t.add_attribute("family", "baseline-wins");
  t.add_attribute("m", "36");
  t.add_attribute("alpha", "0.05");
  return t;
}

TEST(Writers, CsvQuotesAndKeepsFullPrecision) {
  std::ostringstream out;
  write_csv(out, sample());
  EXPECT_EQ(out.str(),
            "method,n,delta,p,note,partial\n"
            "streaming_llm,650,-0.0661,2.5e-06,\"a, \"\"quoted\"\" note\",false\n"
            "h2o#1 {x},0,,0.5,,true\n");
}

TEST(Writers, LatexEscapesAndUsesBooktabs) {
  EXPECT_EQ(latex_escape("a_b & 5% #1 {x} ~ ^ \\ $"),
            "a\\_b \\& 5\\% \\#1 \\{x\\} \\textasciitilde{} \\textasciicircum{} "
            "\\textbackslash{} \\$");
  EXPECT_EQ(latex_escape("Δ ≤ ε − δ"), "$\\Delta$ $\\le$ $\\varepsilon$ $-$ $\\delta$");
  std::ostringstream out;
  write_latex(out, sample());
  const std::string tex = out.str();
  for (const char* needle :
       {"\\toprule", "\\midrule", "\\bottomrule", "\\begin{tabular}{lrrr}",
        "method & n & $\\Delta$ & p \\\\",
        "streaming\\_llm & 650 & $-$0.066 & $2.50\\times 10^{-6}$",
        "h2o\\#1 \\{x\\}$^\\dagger$ & 0 & --- & 0.5", "Family \\texttt{baseline-wins}, $m = 36$",
        "\\label{tab:kvaudit-sample}", "$\\Delta$ per method\\_name \\& 50\\% budget"})
    EXPECT_NE(tex.find(needle), std::string::npos) << needle << "\n" << tex;
  EXPECT_EQ(tex.find("note"), std::string::npos);  // not a LaTeX column
}

TEST(Writers, LongTablesUseLongtable) {
  Table t = sample();
  t.rows.resize(kLatexLongtableRows + 1, t.rows.front());
  std::ostringstream out;
  write_latex(out, t);
  EXPECT_NE(out.str().find("\\begin{longtable}{lrrr}"), std::string::npos);
  EXPECT_NE(out.str().find("\\endhead"), std::string::npos);
}

TEST(Writers, MarkdownMarksPartialRowsAndTruncates) {
  Table t = sample();
  t.markdown_row_limit = 1;
  std::ostringstream out;
  write_markdown_table(out, t, "tables/sample.csv", "");
  const std::string md = out.str();
  EXPECT_NE(md.find("| streaming\\_llm | 650 | -0.066 | 2.50e-06 |"), std::string::npos) << md;
  EXPECT_NE(md.find("… 1 more rows in the CSV (2 in all)."), std::string::npos) << md;
  EXPECT_NE(md.find("† partial: 1 of 2 rows"), std::string::npos) << md;
  EXPECT_NE(md.find("- family: baseline-wins"), std::string::npos) << md;
}

TEST(Writers, NumberFormats) {
  EXPECT_EQ(format_fixed(-0.0001, 3), "0.000");
  EXPECT_EQ(format_fixed(0.19849, 3), "0.198");
  EXPECT_EQ(format_fixed(std::nan(""), 3), "");
  EXPECT_EQ(format_exact(0.1), "0.1");
  EXPECT_EQ(format_p(0.04654801700469596), "0.04655");
  EXPECT_EQ(format_p(7.6e-5), "7.60e-05");
}

TEST(Intervals, HoeffdingMatchesItsFormula) {
  double lo = 0, hi = 0;
  // n = 100, a = 0.05: half-width sqrt(ln(40) / 200) = 0.13581...
  hoeffding_interval(0.5, 100, 0.05, lo, hi);
  EXPECT_NEAR(hi - 0.5, std::sqrt(std::log(40.0) / 200.0), 1e-15);
  EXPECT_NEAR(0.5 - lo, std::sqrt(std::log(40.0) / 200.0), 1e-15);
  hoeffding_interval(0.95, 100, 0.05, lo, hi);
  EXPECT_EQ(hi, 1.0);  // clipped
}

TEST(Families, DeclaredFamilyKeepsTheLockedMAndDefaultCountsRows) {
  const std::vector<LockedFamily> locked{{"gap", "protocol_gap", {"method", "model"}, 12, 0.05}};
  const auto declared = resolve_family(locked, 0.1, "protocol_gap", "protocol_gap",
                                       {"model", "backend", "method"}, 99);
  EXPECT_TRUE(declared.declared);
  EXPECT_EQ(declared.m, 12);
  EXPECT_DOUBLE_EQ(declared.per_comparison_alpha(), 0.05 / 12);
  EXPECT_NE(declared.note.find("one family instance per backend"), std::string::npos);
  const auto fallback = resolve_family(locked, 0.1, "accuracy", "accuracy", {"model"}, 7);
  EXPECT_FALSE(fallback.declared);
  EXPECT_EQ(fallback.m, 7);
  EXPECT_EQ(fallback.name, "accuracy");
  EXPECT_DOUBLE_EQ(fallback.alpha, 0.1);
}

}  // namespace
}  // namespace kvaudit::reduce
