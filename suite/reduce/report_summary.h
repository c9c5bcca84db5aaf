// The Summary at the top of report.md (and <report>/summary.txt): plain sentences generated from
// the numbers of the report's own tables, each naming the table it reads (docs/REPORT.md §The
// Summary).
//
// Sentences, in this order, each only when its table has rows:
//   (a) per protocol, from `baseline_wins`: the methods with a row whose family interval lies
//       above 0 (family_lower > 0: an interval that touches 0 is not a win), or that none has one;
//   (b) from `protocol_gap` (per budget) and `protocol_gap_pooled`: the largest Δ (query-aware −
//       query-agnostic) with its family interval and whether that interval excludes 0;
//   (c) from `backend_confound`: the row with the largest |Δ| (full KV, sdpa − eager), its family
//       interval, and whether the shift exceeds the median / largest inter-method gap even at the
//       interval's end nearest 0; with more rows, in how many it exceeds the median gap that way;
//   (d) per row of `certification` (block, model): the certified policy and its retention (from
//       `certification_candidates`), or the fall-back to full KV, or why nothing was computed; the
//       plug-in rule's choice beside it.
// The generator reads only the tables (by column name), so every number is the table's value
// formatted as report.md formats it (format_fixed with the column's digits). A sentence built from
// a row marked partial says "partial"; so does one about the largest value of a table with partial
// rows, and a per-protocol baseline sentence whose protocol has partial rows.
#pragma once

#include <string>
#include <vector>

#include "suite/reduce/table.h"

namespace kvaudit::reduce {

struct SummarySentence {
  std::string text;         // one plain sentence (no Markdown)
  std::string table_id;     // the table it reads: tables/<table_id>.csv
  std::string table_title;  // that table's heading in report.md
};

// The sentences for `tables` (the report's tables, any order; missing tables are skipped).
std::vector<SummarySentence> report_summary(const std::vector<Table>& tables);

// summary.txt: one sentence a line, no links.
std::string summary_text(const std::vector<SummarySentence>& sentences);

}  // namespace kvaudit::reduce
