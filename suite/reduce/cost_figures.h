// The cost section's figures (cost_analysis.h), per (benchmark, backend, model), one panel per
// protocol (query-aware left):
//   cost_bytes_<benchmark>_<backend>_<model>: mean utility vs mean kept KV bytes (log scale when
//     the bytes span a factor of 8 or more);
//   cost_time_<benchmark>_<backend>_<model>: mean utility vs mean time per cell (ms; log scale
//     likewise).
// A line per method through its budgets (the method's colour and point type of the other
// figures), full KV as a black star, and the Pareto front as a black staircase (the best utility
// reachable at a cost up to x) with its points circled.
#pragma once

#include <vector>

#include "suite/reduce/analysis_context.h"
#include "suite/reduce/cost_analysis.h"
#include "suite/reduce/figures.h"

namespace kvaudit::reduce {

std::vector<Figure> build_cost_figures(const AnalysisContext& ctx, const CostAnalysis& costs);

}  // namespace kvaudit::reduce
