// Backend confound (seed 001): swapping the attention backend of the *uncompressed* model moved
// RULER accuracy by −0.29, more than most method gaps.
//
// Δ_backend = U_full,sdpa − U_full,eager per (model, benchmark, protocol): full-KV cells paired by
// instance (the same request on the sdpa unit and on the eager unit), stratified by task; interval
// and tests as in paired_rows.h, Bonferroni over the manifest's backend_confound family.
// Beside it, the inter-method gaps it competes with: under sdpa, for every budget, the absolute
// differences between the mean utilities of every pair of compressed methods (means over all usable
// instances); the table gives their median and maximum and the fraction smaller than |Δ_backend|.
// Rankings: per (model, benchmark, protocol, budget), Kendall's τ-b between the methods' mean
// utilities under sdpa and under eager (statistics/kendall_tau.h); τ = 1 means the backend does not
// change the ranking.
// Selections: per (model, benchmark, protocol, method, budget), how many of the cells paired across
// backends (the same request, both `ok`) kept identical positions — equal kept digests (records
// schema 4, suite/records/content_digests.h). All identical: the backend changed the scoring only;
// some different: the backend also changed what was kept (for an attention-based method through
// the attention weights it reads); unknown: records without digests (schema < 4).
#pragma once

#include <string>
#include <vector>

#include "suite/reduce/analysis_context.h"
#include "suite/reduce/paired_analysis.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

struct InterMethodGaps {
  std::int64_t pairs = 0;     // method pairs over all budgets
  double median_abs_gap = 0;  // NaN when there are none
  double max_abs_gap = 0;
  double fraction_below_backend = 0;  // of the pairwise gaps, the fraction < |Δ_backend|
};

struct RankingAgreement {
  std::uint16_t model = 0;
  std::uint16_t benchmark = 0;
  std::uint8_t protocol = 0;
  std::uint16_t budget = 0;
  std::vector<std::int16_t> methods;  // methods with a usable mean under both backends
  std::vector<double> sdpa_means;
  std::vector<double> eager_means;
  double tau_b = 0;  // NaN when undefined (fewer than 2 methods, or a constant ranking)
  double p_value = 1;
  bool exact_p = false;
  bool partial = false;
};

struct SelectionAgreement {
  std::uint16_t model = 0;
  std::uint16_t benchmark = 0;
  std::uint8_t protocol = 0;
  std::int16_t method = 0;
  std::uint16_t budget = 0;
  std::int64_t pairs =
      0;  // instances with an ok cell under both backends (reuse: contexts, by question 0)
  std::int64_t identical = 0;  // of them, equal kept digests
  std::int64_t different = 0;
  std::int64_t unknown = 0;  // a record without a kept digest
};

struct BackendConfound {
  PairedAnalysis full_kv;             // dims: model, benchmark, protocol
  std::vector<InterMethodGaps> gaps;  // parallel to full_kv.rows
  std::vector<RankingAgreement> rankings;
  std::vector<SelectionAgreement> selections;  // sorted by (model, benchmark, protocol, method,
                                               // budget)
};

BackendConfound compute_backend_confound(const AnalysisContext& ctx);
std::vector<Table> backend_confound_tables(const AnalysisContext& ctx, const BackendConfound& bc);

}  // namespace kvaudit::reduce
