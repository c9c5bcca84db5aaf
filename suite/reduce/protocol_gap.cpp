// Protocol gap Δ = U_aware − U_agnostic (see protocol_gap.h).
#include "suite/reduce/protocol_gap.h"

namespace kvaudit::reduce {

ProtocolGap compute_protocol_gap(const AnalysisContext& ctx) {
  PairAccumulator per_budget, pooled;
  for (const FrameCell& aware : ctx.frame.cells) {
    if (aware.method < 0 || aware.protocol != kQueryAware) continue;
    const auto partner = ctx.lookup.cell(aware.unit, aware.method, aware.budget, kQueryAgnostic);
    if (!partner) continue;  // the grid has one protocol only
    const FrameCell& agnostic = ctx.frame.cells[*partner];
    per_budget.add({aware.model, aware.backend, aware.benchmark, aware.method, aware.budget}, aware,
                   agnostic);
    pooled.add({aware.backend, aware.benchmark, aware.method}, aware, agnostic);
  }
  ProtocolGap gap;
  gap.per_budget = run_paired_analysis(
      ctx, per_budget, "protocol_gap", "protocol_gap",
      {Dim::model, Dim::backend, Dim::benchmark, Dim::method, Dim::budget}, true);
  gap.pooled = run_paired_analysis(ctx, pooled, "protocol_gap_pooled", "protocol_gap",
                                   {Dim::backend, Dim::benchmark, Dim::method}, false);
  return gap;
}

std::vector<Table> protocol_gap_tables(const AnalysisContext& ctx, const ProtocolGap& gap) {
  std::vector<Table> out;
  out.push_back(paired_analysis_table(
      ctx, gap.per_budget, "Protocol gap per model and budget",
      "Δ = U(query-aware) − U(query-agnostic): the mean utility a method loses when the question "
      "is not visible at compression time. Paired by instance (the same request and cell "
      "configuration under both protocols), stratified by task. Positive Δ: the method's "
      "utility depends on seeing the question. CI: marginal percentile interval; family "
      "interval: Bonferroni over the family; p: one-sided for Δ > 0.",
      "u_aware", "u_agnostic"));
  out.push_back(paired_analysis_table(
      ctx, gap.pooled, "Protocol gap per method, pooled over models and budgets",
      "Δ as above, with each instance's differences averaged over every model and budget of the "
      "method before resampling instances within tasks; the resampling unit stays the "
      "instance, so the interval accounts for the dependence between budgets and models on the "
      "same request.",
      "u_aware", "u_agnostic"));
  return out;
}

}  // namespace kvaudit::reduce
