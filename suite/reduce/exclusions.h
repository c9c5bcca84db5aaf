// Instances left out and cells that failed, reported rather than dropped silently.
//
// Exclusions: cells with status `excluded` (the tokenizer check re-measured the final prompt and it
// did not fit, or the plan excluded the instance; the reason is the record's error text), counted
// per (model, backend, benchmark, task) and reason, in cells and in instances (units). Excluded
// cells leave the analyses (their n shrinks) without making numbers partial: the exclusion is a
// property of the instance, not of the run.
// Failures: cells with status error, oom or abandoned, or ok without a score, counted per (status,
// model, backend, benchmark, protocol, method) with the first error message. They make every
// number computed from their group partial; certification counts them as violations.
#pragma once

#include <vector>

#include "suite/reduce/study_frame.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

struct ExclusionSummary {
  std::int64_t excluded_cells = 0;
  std::int64_t excluded_units = 0;
  std::int64_t failed_cells = 0;
};

ExclusionSummary summarize_exclusions(const StudyFrame& frame);

// exclusions (per task and reason) and failed_cells (per status and group).
std::vector<Table> exclusion_tables(const StudyFrame& frame);

}  // namespace kvaudit::reduce
