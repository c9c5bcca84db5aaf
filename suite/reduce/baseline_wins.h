// Does a method beat the best of three trivial baselines (seed 001's best-of-3 anchor)?
//
// Best-of-3, exactly: for each (model, backend, benchmark, protocol, budget, task), the trivial
// baseline (random, knorm, streaming_llm: the methods of those catalogue ids present in the
// grid) with the highest mean utility over the task's usable instances; ties go to the earlier
// configuration name. Selection effect: the choice is made on the same instances the comparison
// uses, so the chosen baseline's mean is biased upwards (the maximum of noisy means); the
// comparison is conservative for the method.
// Comparison: per (model, backend, benchmark, protocol, method, budget) for every compressed
// method that is not a trivial baseline, d_i = U_method(x_i) − U_best-of-3(task(x_i))(x_i), paired
// by instance, stratified by task (paired_rows.h: bootstrap, or exact McNemar for small 0/1 rows).
// A win is Δ̂ > 0; a significant win has p ≤ α/m (the baseline_wins family). Counts per
// (benchmark, protocol, method) summarise the rows ("wins in 31 of 36 cells").
#pragma once

#include <string>
#include <vector>

#include "suite/reduce/analysis_context.h"
#include "suite/reduce/paired_analysis.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

struct BaselineChoice {
  std::uint16_t model = 0;
  std::uint8_t backend = 0;
  std::uint16_t benchmark = 0;
  std::uint8_t protocol = 0;
  std::uint16_t budget = 0;
  std::uint32_t task = 0;
  std::int16_t chosen = -1;  // method index; -1 when no baseline has a usable instance
  std::vector<std::pair<std::int16_t, double>> means;  // every baseline's mean (NaN: none usable)
  bool partial = false;
};

struct WinCount {
  std::uint16_t benchmark = 0;
  std::uint8_t protocol = 0;
  std::int16_t method = 0;
  std::int64_t rows = 0;
  std::int64_t wins = 0;
  std::int64_t significant_wins = 0;
  std::int64_t significant_losses = 0;  // one-sided p for Δ < 0 ≤ α/m (bootstrap rows only)
  double mean_delta = 0;
  std::int64_t partial_rows = 0;
};

struct BaselineWins {
  std::vector<BaselineChoice> choices;
  PairedAnalysis comparisons;  // dims: model, backend, benchmark, protocol, method, budget
  std::vector<WinCount> counts;
};

BaselineWins compute_baseline_wins(const AnalysisContext& ctx);
std::vector<Table> baseline_win_tables(const AnalysisContext& ctx, const BaselineWins& wins);

}  // namespace kvaudit::reduce
