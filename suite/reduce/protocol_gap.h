// Protocol gap (seed 001): how much of a method's utility comes from seeing the question.
//
//   Δ = U_query-aware − U_query-agnostic
// per (model, backend, benchmark, method, budget), paired by instance (the same request and cell
// configuration under both protocols), stratified by task, over every compressed cell whose grid
// has both protocols. Pooled per (backend, benchmark, method): for each instance the pair
// differences are averaged over models and budgets, then resampled the same way (strata = tasks).
// Intervals and tests: paired_rows.h. Family: the manifest's protocol_gap family for the
// per-budget table; the pooled table is its own family (all its rows).
#pragma once

#include <vector>

#include "suite/reduce/analysis_context.h"
#include "suite/reduce/paired_analysis.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

struct ProtocolGap {
  PairedAnalysis per_budget;  // dims: model, backend, benchmark, method, budget
  PairedAnalysis pooled;      // dims: backend, benchmark, method
};

ProtocolGap compute_protocol_gap(const AnalysisContext& ctx);
std::vector<Table> protocol_gap_tables(const AnalysisContext& ctx, const ProtocolGap& gap);

}  // namespace kvaudit::reduce
