// Coverage: is every cell the manifest expands to present exactly once, and usable?
//
// Every expected cell is in one state (study_frame.h): ok, excluded, failed or missing. The study
// is complete when no cell is missing; cells seen in more than one published shard are counted
// once (the first shard's record, docs/RECORDS.md) and listed; records of cells the manifest does
// not expand to are listed as unexpected and used nowhere. Any analysis number computed from a
// group with a missing or failed cell is marked partial (see cell_group.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "suite/reduce/study_frame.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

struct StateCounts {
  std::int64_t expected = 0;
  std::int64_t ok = 0;
  std::int64_t excluded = 0;
  std::int64_t failed = 0;
  std::int64_t missing = 0;
  std::int64_t skipped = 0;  // missing by design: not needed by a sequential calibration
  void add(CellState s);
};

struct Coverage {
  StateCounts total;
  bool complete = false;             // no expected cell is missing (skipped cells are not)
  std::vector<std::size_t> missing;  // frame cell indices, in cell-id order
  std::vector<std::size_t> skipped;  // frame cell indices a sequential calibration did not need
  std::size_t duplicates = 0;        // cells in more than one published shard (counted once)
  std::size_t unexpected = 0;        // records of cells the manifest does not expand to
  std::size_t salvaged = 0;          // records taken from unpublished shards
  bool reuse = false;                // the frame has reuse rows: counts are per (cell, question)
  // (model, backend, benchmark, protocol, method) -> counts
  std::map<std::tuple<std::uint16_t, std::uint8_t, std::uint16_t, std::uint8_t, std::int16_t>,
           StateCounts>
      by_group;
};

Coverage compute_coverage(const StudyFrame& frame);

// Moves the frame cells `skipped` (sorted; certification_analysis.h
// CertificationRun::sequential_skipped) from missing to skipped and recomputes `complete`. The
// analyses still see them as absent (their groups are partial); the study is complete without
// them, and the coverage table gains a `skipped` column.
void mark_sequentially_skipped(const StudyFrame& frame, const std::vector<std::size_t>& skipped,
                               Coverage& coverage);

// coverage (by model/backend/benchmark/protocol/method), missing_cells (every missing cell),
// duplicate_cells, unexpected_records.
std::vector<Table> coverage_tables(const StudyFrame& frame, const Coverage& coverage);

}  // namespace kvaudit::reduce
