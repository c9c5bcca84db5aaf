// Accuracy per (model, backend, benchmark, protocol, method, budget, task) with simultaneous
// intervals over the Bonferroni family (the manifest's accuracy family, or the table's rows).
//
// Utility = the record's score (in [0, 1]); n = usable instances (ok cells).
// 0/1 utilities: two-sided Clopper–Pearson interval for x = Σ scores out of n at level 1 − α/m
// (statistics/clopper_pearson.h).
// Fractional utilities (e.g. RULER multi-value recall, LongBench F1): Clopper–Pearson does not
// apply; the interval is Hoeffding's, mean ± √(ln(2m/α) / (2n)) clipped to [0, 1], valid for any
// utilities in [0, 1] at the same level 1 − α/m (Hoeffding 1963, Theorem 1).
// Reuse cells (one row per (context, question)): the questions of a context are not independent,
// so neither interval applies; the interval is the percentile interval of the stratified cluster
// bootstrap of the mean (statistics/cluster_bootstrap.h with arm B = 0, the task's one stratum,
// cluster = context), at the same level 1 − α/m, with the reduce's B and seed
// (docs/design/reuse.md §Reduce).
// A second table gives the mean utility per (model, backend, benchmark, protocol, method, budget)
// over all tasks' usable instances (descriptive; the accuracy-vs-compression figure plots it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "suite/reduce/analysis_context.h"
#include "suite/reduce/families.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

struct AccuracyRow {
  std::uint16_t model = 0;
  std::uint8_t backend = 0;
  std::uint16_t benchmark = 0;
  std::uint32_t task = 0;
  std::uint8_t protocol = 0;
  std::int16_t method = -1;
  std::uint16_t budget = 0;
  std::int64_t n = 0;         // usable instances (reuse: (context, question) pairs)
  std::int64_t contexts = 0;  // reuse: contexts resampled; 0 otherwise
  double sum = 0;             // Σ utilities
  double mean = 0;            // NaN when n = 0
  double lower = 0;
  double upper = 1;
  std::string interval;  // "clopper-pearson", "hoeffding", "cluster-bootstrap" or "" when n = 0
  std::int64_t excluded = 0;
  std::int64_t failed = 0;
  std::int64_t missing = 0;
  bool partial() const { return failed + missing > 0; }
};

struct AccuracySummaryRow {
  std::uint16_t model = 0;
  std::uint8_t backend = 0;
  std::uint16_t benchmark = 0;
  std::uint8_t protocol = 0;
  std::int16_t method = -1;
  std::uint16_t budget = 0;
  std::int64_t n = 0;
  double mean = 0;
  double realised_retention = 0;  // mean over cells that report it; NaN if none
  bool partial = false;
};

struct Accuracy {
  ResolvedFamily family;
  std::vector<AccuracyRow> rows;
  std::vector<AccuracySummaryRow> summary;
};

// Hoeffding's two-sided interval for the mean of n values in [0, 1] at level 1 − a.
void hoeffding_interval(double mean, std::int64_t n, double a, double& lower, double& upper);

Accuracy compute_accuracy(const AnalysisContext& ctx);
std::vector<Table> accuracy_tables(const AnalysisContext& ctx, const Accuracy& accuracy);

}  // namespace kvaudit::reduce
