// The Summary of report.md (suite/reduce/report_summary.h): every sentence against the values of
// hand-built tables with the analyses' own column layout (paired_table.h), including mutations
// that must change the wording (an interval touching 0 is no win; a partial row is called partial).
#include "suite/reduce/report_summary.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "suite/reduce/paired_table.h"
#include "suite/reduce/report_markdown.h"

namespace kvaudit::reduce {
namespace {

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

// A table with text key columns followed by the shared paired columns.
Table paired_table(const std::string& id, const std::string& title,
                   std::initializer_list<const char*> keys) {
  Table t;
  t.id = id;
  t.title = title;
  for (const char* k : keys) t.add_column(k, ColumnType::text);
  add_paired_columns(t, "u_a", "u_b");
  return t;
}

using Cells = std::vector<std::pair<std::string, Value>>;

// Appends a row: every column not applicable, then `cells` by column name; partial = false.
void add_row(Table& t, const Cells& cells) {
  std::vector<Value> row(t.columns.size());
  if (t.partial_column >= 0) row[static_cast<std::size_t>(t.partial_column)] = false;
  for (const auto& [name, v] : cells) row[t.column_index(name)] = v;
  t.rows.push_back(std::move(row));
}

void set(Table& t, std::size_t row, const std::string& col, Value v) {
  t.rows[row][t.column_index(col)] = std::move(v);
}

Cells interval(double delta, double lo, double hi) {
  return {{"delta", delta}, {"family_lower", lo}, {"family_upper", hi}};
}

Cells operator+(Cells a, const Cells& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Table baseline_wins() {
  Table t = paired_table("baseline_wins", "Methods against the best-of-3 trivial baseline",
                         {"model", "backend", "benchmark", "protocol", "method", "budget"});
  const auto key = [](const char* protocol, const char* method, const char* budget) {
    return Cells{{"model", std::string("m")},         {"backend", std::string("sdpa")},
                 {"benchmark", std::string("ruler")}, {"protocol", std::string(protocol)},
                 {"method", std::string(method)},     {"budget", std::string(budget)}};
  };
  // query-aware: keydiff wins once; snapkv's interval touches 0 (no win); tova wins on a partial
  // row.
  add_row(t, key("query-aware", "keydiff", "compression=0.5") + interval(0.1, 0.05, 0.15));
  add_row(t, key("query-aware", "keydiff", "compression=0.75") + interval(0.02, -0.01, 0.05));
  add_row(t, key("query-aware", "snapkv", "compression=0.5") + interval(0.08, 0.0, 0.16));
  add_row(t, key("query-aware", "tova", "compression=0.5") + interval(0.3, 0.2, 0.4));
  set(t, 3, "partial", true);
  // query-agnostic: nothing above 0; one row without usable pairs.
  add_row(t, key("query-agnostic", "keydiff", "compression=0.5") + interval(0.0, -0.1, 0.1));
  add_row(t, key("query-agnostic", "snapkv", "compression=0.5") + interval(-0.2, -0.3, -0.1));
  add_row(t, key("query-agnostic", "tova", "compression=0.5"));
  return t;
}

// Whether a baseline sentence names `method` among the winners ("…: a in 1 of 2 rows, b in …").
bool names_winner(const std::string& s, const std::string& method) {
  for (const char* before : {": ", ", ", " and "})
    if (contains(s, before + method + " in ")) return true;
  return false;
}

TEST(ReportSummary, BaselineWinnersAreExactlyTheRowsWithAnIntervalAbove0) {
  const Table t = baseline_wins();
  const auto s = report_summary({t});
  ASSERT_EQ(s.size(), 2u);
  // Protocols in table order; the winners are exactly the methods with a row whose
  // family_lower > 0, recomputed here from the table.
  for (const auto& [i, protocol] : std::vector<std::pair<std::size_t, std::string>>{
           {0, "query-aware"}, {1, "query-agnostic"}}) {
    EXPECT_EQ(s[i].table_id, "baseline_wins");
    EXPECT_EQ(s[i].table_title, t.title);
    EXPECT_EQ(s[i].text.rfind("Under " + protocol + ", ", 0), 0u) << s[i].text;
    for (const char* method : {"keydiff", "snapkv", "tova"}) {
      bool wins = false;
      for (const auto& row : t.rows) {
        if (std::get<std::string>(row[t.column_index("protocol")]) != protocol ||
            std::get<std::string>(row[t.column_index("method")]) != method)
          continue;
        const auto* lo = std::get_if<double>(&row[t.column_index("family_lower")]);
        wins = wins || (lo != nullptr && *lo > 0);
      }
      EXPECT_EQ(names_winner(s[i].text, method), wins) << method << ": " << s[i].text;
    }
  }
  EXPECT_TRUE(contains(s[0].text, "2 of 3 methods beat the best-of-3 trivial baseline"))
      << s[0].text;
  EXPECT_TRUE(contains(s[0].text, "keydiff in 1 of 2 rows")) << s[0].text;
  // The winning row of tova is partial, and so is the claim.
  EXPECT_TRUE(contains(s[0].text, "tova in 1 of 1 row (1 partial)")) << s[0].text;
  EXPECT_TRUE(contains(s[0].text, "partial: 1 of the 4 rows")) << s[0].text;
  EXPECT_TRUE(contains(s[1].text, "no method beat the best-of-3 trivial baseline")) << s[1].text;
  EXPECT_TRUE(contains(s[1].text, "1 of the 3 rows have no usable pairs")) << s[1].text;
  EXPECT_FALSE(contains(s[1].text, "partial")) << s[1].text;
}

TEST(ReportSummary, AnIntervalTouching0IsNoWinAndOneJustAbove0Is) {
  Table t = baseline_wins();
  ASSERT_FALSE(names_winner(report_summary({t})[0].text, "snapkv"));  // family_lower = 0 exactly
  set(t, 2, "family_lower", 1e-9);  // mutation: the interval now excludes 0
  const auto s = report_summary({t});
  EXPECT_TRUE(names_winner(s[0].text, "snapkv")) << s[0].text;
  EXPECT_TRUE(contains(s[0].text, "3 of 3 methods")) << s[0].text;
  // A win of the baseline (interval below 0) is no win of the method either.
  set(t, 2, "family_lower", -0.3);
  set(t, 2, "family_upper", -0.01);
  EXPECT_FALSE(names_winner(report_summary({t})[0].text, "snapkv"));
}

Table protocol_gap() {
  Table t = paired_table("protocol_gap", "Protocol gap per model and budget",
                         {"model", "backend", "benchmark", "method", "budget"});
  const auto key = [](const char* method, const char* budget) {
    return Cells{{"model", std::string("m")},
                 {"backend", std::string("sdpa")},
                 {"benchmark", std::string("ruler")},
                 {"method", std::string(method)},
                 {"budget", std::string(budget)}};
  };
  add_row(t, key("keydiff", "compression=0.5") + interval(0.1, -0.02, 0.2));
  add_row(t, key("snapkv", "compression=0.75") + interval(0.30449, 0.20049, 0.40051));
  add_row(t, key("snapkv", "compression=0.5") + interval(0.25, 0.15, 0.35));
  add_row(t, key("tova", "compression=0.5"));  // no usable pairs
  return t;
}

TEST(ReportSummary, LargestProtocolGapIsTheMaximumWithTheTablesRounding) {
  Table t = protocol_gap();
  auto s = report_summary({t});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].table_id, "protocol_gap");
  // The maximum Δ, with 3 decimals as the table shows it.
  EXPECT_TRUE(contains(s[0].text, "is snapkv at compression=0.75 (m, sdpa, ruler)")) << s[0].text;
  EXPECT_TRUE(contains(s[0].text,
                       "Δ = 0.304, family interval [0.200, 0.401], which lies "
                       "entirely above 0"))
      << s[0].text;
  EXPECT_FALSE(contains(s[0].text, "partial")) << s[0].text;
  // Mutations: the interval reaches 0 → "includes 0"; the row partial → "partial"; another row
  // larger → that row.
  set(t, 1, "family_lower", -0.01);
  set(t, 1, "partial", true);
  s = report_summary({t});
  EXPECT_TRUE(contains(s[0].text, "[-0.010, 0.401], which includes 0")) << s[0].text;
  EXPECT_FALSE(contains(s[0].text, "above 0")) << s[0].text;
  EXPECT_TRUE(contains(s[0].text, "partial: computed from groups with missing")) << s[0].text;
  set(t, 0, "delta", 0.5);
  s = report_summary({t});
  // The maximum of a table with a partial row is partial too.
  EXPECT_TRUE(contains(s[0].text,
                       "partial: the largest of 4 rows, 1 of them computed from groups "
                       "with missing or failed cells"))
      << s[0].text;
  EXPECT_TRUE(contains(s[0].text, "is keydiff at compression=0.5")) << s[0].text;
  EXPECT_TRUE(contains(s[0].text, "Δ = 0.500, family interval [-0.020, 0.200], which includes 0"))
      << s[0].text;
}

TEST(ReportSummary, ATiedLargestGapSaysHowManyRowsShareIt) {
  // Every gap 0 (seen on a one-instance study): the sentence names the first row but must say that
  // it does not stand out.
  Table t = protocol_gap();
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    set(t, r, "delta", 0.0);
    set(t, r, "family_lower", 0.0);
    set(t, r, "family_upper", 0.0);
  }
  auto s = report_summary({t});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(contains(s[0].text, "(the first of 4 rows with this Δ): Δ = 0.000")) << s[0].text;
  set(t, 2, "delta", 0.1);
  s = report_summary({t});
  EXPECT_FALSE(contains(s[0].text, "rows with this Δ")) << s[0].text;
}

TEST(ReportSummary, PooledProtocolGapFollowsThePerBudgetOne) {
  Table pooled =
      paired_table("protocol_gap_pooled", "Protocol gap per method, pooled over models and budgets",
                   {"backend", "benchmark", "method"});
  add_row(pooled, Cells{{"backend", std::string("sdpa")},
                        {"benchmark", std::string("ruler")},
                        {"method", std::string("snapkv")}} +
                      interval(0.198, 0.15, 0.25));
  add_row(pooled, Cells{{"backend", std::string("sdpa")},
                        {"benchmark", std::string("ruler")},
                        {"method", std::string("keydiff")}} +
                      interval(-0.05, -0.1, -0.01));
  const auto s = report_summary({pooled, protocol_gap()});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].table_id, "protocol_gap");
  EXPECT_EQ(s[1].table_id, "protocol_gap_pooled");
  EXPECT_TRUE(contains(s[1].text,
                       "the largest protocol gap is snapkv (sdpa, ruler): Δ = 0.198, "
                       "family interval [0.150, 0.250], which lies entirely above 0"))
      << s[1].text;
}

Table backend_confound() {
  Table t = paired_table("backend_confound", "Backend confound: uncompressed model, sdpa vs eager",
                         {"model", "benchmark", "protocol"});
  t.add_column("method_gap_pairs", ColumnType::integer, 0, false);
  t.add_column("median_method_gap", ColumnType::real, 3, true, "median |gap|");
  t.add_column("max_method_gap", ColumnType::real, 3, false);
  t.add_column("fraction_gaps_below", ColumnType::real, 3, true, "gaps < |Δ|");
  const auto key = [](const char* model) {
    return Cells{{"model", std::string(model)},
                 {"benchmark", std::string("ruler")},
                 {"protocol", std::string("query-aware")}};
  };
  add_row(t, key("model-a") + interval(-0.29, -0.35, -0.23) +
                 Cells{{"method_gap_pairs", std::int64_t{30}},
                       {"median_method_gap", 0.05},
                       {"max_method_gap", 0.2},
                       {"fraction_gaps_below", 1.0}});
  add_row(t, key("model-b") + interval(0.01, -0.04, 0.06) +
                 Cells{{"method_gap_pairs", std::int64_t{30}},
                       {"median_method_gap", 0.05},
                       {"max_method_gap", 0.2},
                       {"fraction_gaps_below", 0.1}});
  return t;
}

TEST(ReportSummary, BackendSentenceFlipsWithTheNumbers) {
  Table t = backend_confound();
  auto s = report_summary({t});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].table_id, "backend_confound");
  EXPECT_TRUE(contains(s[0].text,
                       "is on model-a, ruler, query-aware: Δ = -0.290, family "
                       "interval [-0.350, -0.230], which lies entirely below 0"))
      << s[0].text;
  EXPECT_TRUE(contains(s[0].text,
                       "even the interval's end nearest 0 (0.230) exceeds every "
                       "inter-method gap under sdpa (median 0.050, largest 0.200)"))
      << s[0].text;
  EXPECT_TRUE(contains(s[1].text, "In 1 of the 2 (model, benchmark, protocol) rows")) << s[1].text;
  // The largest method gap above the interval's near end: exceeds the median only.
  set(t, 0, "max_method_gap", 0.3);
  s = report_summary({t});
  EXPECT_TRUE(contains(s[0].text,
                       "exceeds the median inter-method gap under sdpa but not the "
                       "largest (median 0.050, largest 0.300)"))
      << s[0].text;
  EXPECT_FALSE(contains(s[0].text, "every")) << s[0].text;
  // The interval reaches 0: no claim that the shift exceeds anything, whatever |Δ| is.
  set(t, 0, "family_upper", 0.01);
  s = report_summary({t});
  EXPECT_TRUE(contains(s[0].text, "which includes 0")) << s[0].text;
  EXPECT_TRUE(contains(s[0].text,
                       "the interval does not show the shift exceeding the median "
                       "inter-method gap under sdpa (median 0.050, largest 0.300)"))
      << s[0].text;
  EXPECT_TRUE(contains(s[0].text, "a fraction 1.000 of the method gaps are smaller than |Δ|"))
      << s[0].text;
  EXPECT_TRUE(contains(s[1].text, "In 0 of the 2")) << s[1].text;
  // A larger |Δ| elsewhere becomes the headline; partial rows are called partial.
  set(t, 1, "delta", 0.4);
  set(t, 1, "partial", true);
  s = report_summary({t});
  EXPECT_TRUE(contains(s[0].text, "is on model-b")) << s[0].text;
  EXPECT_TRUE(contains(s[0].text, "partial")) << s[0].text;
  EXPECT_TRUE(contains(s[1].text, "partial: 1 of the 2 rows")) << s[1].text;
}

TEST(ReportSummary, BackendSentenceWithoutMethodGapsAndWithOneRow) {
  Table t = backend_confound();
  t.rows.pop_back();
  set(t, 0, "median_method_gap", Value{});
  set(t, 0, "max_method_gap", Value{});
  const auto s = report_summary({t});
  ASSERT_EQ(s.size(), 1u);  // one row: no count sentence
  EXPECT_TRUE(contains(s[0].text, "there are no inter-method gaps to compare it with"))
      << s[0].text;
}

Table certification() {
  Table t;
  t.id = "certification";
  t.title = "Risk certification (fixed-sequence Learn-then-Test)";
  for (const char* name : {"block", "model", "method", "benchmark"})
    t.add_column(name, ColumnType::text);
  t.add_column("n", ColumnType::integer);
  t.add_column("selected", ColumnType::text);
  t.add_column("plug_in", ColumnType::text, 0, true, "plug-in");
  t.add_column("test_risk", ColumnType::real, 4, true, "test risk");
  t.add_column("plug_in_test_risk", ColumnType::real, 4, true, "plug-in test");
  t.add_column("note", ColumnType::text, 0, false);
  t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
  const auto row = [&](const char* block, const char* selected, const char* plug_in, Value risk,
                       Value plug_in_risk, const char* note) {
    add_row(t, {{"block", std::string(block)},
                {"model", std::string("model-a")},
                {"method", std::string("snapkv")},
                {"benchmark", std::string("ruler")},
                {"n", std::int64_t{90}},
                {"selected", std::string(selected)},
                {"plug_in", std::string(plug_in)},
                {"test_risk", risk},
                {"plug_in_test_risk", plug_in_risk},
                {"note", std::string(note)}});
  };
  row("certified", "snapkv@0.5", "snapkv@0.75", 1.0 / 30, 0.123456, "");
  row("fallback", "full-kv", "snapkv@0.5", 0.0, 0.25, "");
  row("both-full", "full-kv", "full-kv", 0.0, 0.0, "");
  row("reuse", "—", "—", Value{}, Value{}, "reuse cells are not certified");
  return t;
}

Table certification_candidates() {
  Table t;
  t.id = "certification_candidates";
  t.title = "Certification candidates in preregistered order";
  for (const char* name : {"block", "model"}) t.add_column(name, ColumnType::text);
  t.add_column("candidate", ColumnType::text);
  t.add_column("retention", ColumnType::real, 3);
  for (const char* block : {"certified", "fallback"})
    for (const auto& [id, retention] :
         std::vector<std::pair<const char*, double>>{{"snapkv@0.5", 0.5}, {"snapkv@0.75", 0.25}})
      add_row(t, {{"block", std::string(block)},
                  {"model", std::string("model-a")},
                  {"candidate", std::string(id)},
                  {"retention", retention}});
  return t;
}

TEST(ReportSummary, CertificationSaysCertifiedOrFallbackBesideThePlugIn) {
  Table t = certification();
  auto s = report_summary({t, certification_candidates()});
  ASSERT_EQ(s.size(), 4u);
  for (const auto& x : s) EXPECT_EQ(x.table_id, "certification");
  EXPECT_TRUE(contains(s[0].text,
                       "Certification block certified (snapkv on ruler, model "
                       "model-a): certifies snapkv@0.5 (retention 0.500, test risk "
                       "0.0333); the plug-in rule (no guarantee) picks snapkv@0.75 "
                       "(retention 0.250, test risk 0.1235)."))
      << s[0].text;
  EXPECT_TRUE(contains(s[1].text,
                       "no candidate is certified, so the policy falls back to full "
                       "KV; the plug-in rule (no guarantee) picks snapkv@0.5 "
                       "(retention 0.500, test risk 0.2500)."))
      << s[1].text;
  EXPECT_FALSE(contains(s[1].text, "certifies")) << s[1].text;
  EXPECT_TRUE(contains(s[2].text,
                       "falls back to full KV; the plug-in rule (no guarantee) also "
                       "picks full KV."))
      << s[2].text;
  EXPECT_TRUE(contains(s[3].text, "not computed: reuse cells are not certified.")) << s[3].text;
  for (const auto& x : s) EXPECT_FALSE(contains(x.text, "partial")) << x.text;
  // A partial row says so (missing or failed cells counted as violations).
  set(t, 0, "partial", true);
  s = report_summary({t, certification_candidates()});
  EXPECT_TRUE(contains(s[0].text, "partial: missing or failed cells were counted as violations"))
      << s[0].text;
  EXPECT_FALSE(contains(s[1].text, "partial")) << s[1].text;
  // Without the candidates table: no retention, the rest unchanged.
  s = report_summary({t});
  EXPECT_TRUE(contains(s[0].text, "certifies snapkv@0.5 (test risk 0.0333)")) << s[0].text;
}

TEST(ReportSummary, OnlyTablesWithRowsGetSentencesInAFixedOrder) {
  EXPECT_TRUE(report_summary({}).empty());
  Table empty_wins = baseline_wins();
  empty_wins.rows.clear();
  EXPECT_TRUE(report_summary({empty_wins}).empty());
  // Any table order in; (a) baseline, (b) protocol gap, (c) backend, (d) certification out.
  const auto s = report_summary(
      {certification(), backend_confound(), protocol_gap(), baseline_wins(), empty_wins});
  std::vector<std::string> ids;
  for (const auto& x : s) ids.push_back(x.table_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"baseline_wins", "baseline_wins", "protocol_gap",
                                           "backend_confound", "backend_confound", "certification",
                                           "certification", "certification", "certification"}));
  // summary.txt: one sentence a line, no Markdown links.
  const std::string txt = summary_text(s);
  std::size_t lines = 0;
  for (char c : txt) lines += c == '\n' ? 1 : 0;
  EXPECT_EQ(lines, s.size());
  EXPECT_FALSE(contains(txt, "]("));
  EXPECT_EQ(txt.substr(0, txt.find('\n')), s[0].text);
}

TEST(ReportSummary, AnchorsFollowTheRenderersRule) {
  EXPECT_EQ(markdown_anchor("Protocol gap per model and budget"),
            "protocol-gap-per-model-and-budget");
  EXPECT_EQ(markdown_anchor("Backend confound: uncompressed model, sdpa vs eager"),
            "backend-confound-uncompressed-model-sdpa-vs-eager");
  EXPECT_EQ(markdown_anchor("Risk certification (fixed-sequence Learn-then-Test)"),
            "risk-certification-fixed-sequence-learn-then-test");
  EXPECT_EQ(markdown_anchor("Methods against the best-of-3 trivial baseline"),
            "methods-against-the-best-of-3-trivial-baseline");
  EXPECT_EQ(markdown_anchor("Δ per method — pooled"), "δ-per-method--pooled");
}

}  // namespace
}  // namespace kvaudit::reduce
