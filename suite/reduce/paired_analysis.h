// A paired analysis from accumulated pairs to a table: resolves the family over the rows, runs the
// bootstrap (and McNemar) for every row, and lays the rows out with one column per key dimension
// followed by the shared paired columns (paired_table.h).
#pragma once

#include <string>
#include <vector>

#include "suite/reduce/analysis_context.h"
#include "suite/reduce/families.h"
#include "suite/reduce/pair_accumulator.h"
#include "suite/reduce/paired_rows.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

struct PairedAnalysisRow {
  RowKey key;  // dimension codes, in PairedAnalysis::dims order
  PairAccumulator::Row pairs;
  PairedRowResult result;
  std::string label(const AnalysisContext& ctx, const std::vector<Dim>& dims, Dim d) const;
};

struct PairedAnalysis {
  std::string table_id;
  std::vector<Dim> dims;
  ResolvedFamily family;
  std::vector<PairedAnalysisRow> rows;  // in key order
  std::string label(const AnalysisContext& ctx, const PairedAnalysisRow& row, Dim d) const;
};

// `declared_family`: whether a family the manifest declares for `analysis` applies to this table
// (false for secondary tables such as pooled rows, which always get a per-table family).
PairedAnalysis run_paired_analysis(const AnalysisContext& ctx, const PairAccumulator& pairs,
                                   const std::string& table_id, const std::string& analysis,
                                   const std::vector<Dim>& dims, bool declared_family);

Table paired_analysis_table(const AnalysisContext& ctx, const PairedAnalysis& analysis,
                            const std::string& title, const std::string& description,
                            const std::string& arm_a, const std::string& arm_b);

}  // namespace kvaudit::reduce
