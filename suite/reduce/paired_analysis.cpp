// A paired analysis from accumulated pairs to a table (see paired_analysis.h).
#include "suite/reduce/paired_analysis.h"

#include <algorithm>

#include "suite/reduce/paired_table.h"

namespace kvaudit::reduce {

std::string PairedAnalysisRow::label(const AnalysisContext& ctx, const std::vector<Dim>& dims,
                                     Dim d) const {
  const auto it = std::find(dims.begin(), dims.end(), d);
  if (it == dims.end()) return "";
  return ctx.label(d, key[static_cast<std::size_t>(it - dims.begin())]);
}

std::string PairedAnalysis::label(const AnalysisContext& ctx, const PairedAnalysisRow& row,
                                  Dim d) const {
  return row.label(ctx, dims, d);
}

PairedAnalysis run_paired_analysis(const AnalysisContext& ctx, const PairAccumulator& pairs,
                                   const std::string& table_id, const std::string& analysis,
                                   const std::vector<Dim>& dims, bool declared_family) {
  PairedAnalysis out;
  out.table_id = table_id;
  out.dims = dims;
  std::vector<std::string> dim_names;
  for (Dim d : dims) dim_names.push_back(dim_name(d));
  static const std::vector<LockedFamily> kNone;
  out.family = resolve_family(declared_family ? ctx.families : kNone, ctx.alpha, analysis, table_id,
                              dim_names, static_cast<std::int64_t>(pairs.rows().size()));
  std::vector<PairedRow> rows;
  for (const auto& [key, row] : pairs.rows()) {
    PairedAnalysisRow r;
    r.key = key;
    r.pairs = row;
    out.rows.push_back(std::move(r));
    PairedRow pr;
    for (std::size_t i = 0; i < dims.size(); ++i)
      pr.name += (i ? "/" : "") + ctx.label(dims[i], key[i]);
    pr.instances = PairAccumulator::instances(row);
    pr.clustered = row.clustered;
    pr.family = &out.family;
    rows.push_back(std::move(pr));
  }
  const auto results = run_paired_rows(rows, ctx.task_sizes, ctx.bootstrap);
  for (std::size_t i = 0; i < results.size(); ++i) out.rows[i].result = results[i];
  return out;
}

Table paired_analysis_table(const AnalysisContext& ctx, const PairedAnalysis& a,
                            const std::string& title, const std::string& description,
                            const std::string& arm_a, const std::string& arm_b) {
  Table t;
  t.id = a.table_id;
  t.title = title;
  t.description = description;
  for (Dim d : a.dims) t.add_column(dim_name(d), ColumnType::text);
  add_paired_columns(t, arm_a, arm_b);
  for (const auto& r : a.rows) {
    std::vector<Value> row;
    for (std::size_t i = 0; i < a.dims.size(); ++i)
      row.emplace_back(ctx.label(a.dims[i], r.key[i]));
    append_paired_values(row, r.result, r.pairs);
    t.rows.push_back(std::move(row));
  }
  add_paired_attributes(t, ctx.bootstrap, a.family);
  if (std::any_of(a.rows.begin(), a.rows.end(),
                  [](const PairedAnalysisRow& r) { return r.result.clustered; }))
    t.notes.push_back(kReuseIntervalNote);
  return t;
}

}  // namespace kvaudit::reduce
