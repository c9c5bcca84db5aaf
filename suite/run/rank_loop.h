// The per-rank loop of `kvaudit run`: execute this rank's units longest first, append one record
// per cell to the rank's shard, flush after every unit, publish at the end or on a stop request.
//
//   * One ShardWriter per rank and launch (provenance filled by the caller: rank, world size,
//     attempt, manifest hash, ...); the shard is created lazily before the first unit, so a rank
//     with no work leaves no file.
//   * Before each unit the stop flag (stop_signal.h) is polled: after a stop signal the rank
//     takes no further unit, so a stop takes effect within one unit.
//   * A unit that throws (std::bad_alloc → status oom; any other std::exception → status error)
//     becomes one failure record per cell, with the message, and the rank goes on. Records the
//     executor returns must match the requested cells one to one (else InternalError: a bug).
//   * After every unit the writer is flushed, so a SIGKILL loses at most the current unit.
//   * On the way out (done, stopped, or an exception from the writer) the shard is published when
//     it holds records; if publishing itself fails the .tmp stays for the next launch's salvage
//     (cells_unpublished says how many records it holds).
#pragma once

#include <array>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <functional>
#include <ostream>
#include <span>
#include <vector>

#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest.h"
#include "suite/records/cell_record.h"
#include "suite/records/shard_writer.h"
#include "suite/run/failure_tally.h"
#include "suite/run/resume.h"
#include "suite/run/sharding.h"

namespace kvaudit::run {

// Runs one unit for the given cells; returns one record per cell, in the order given.
using ExecuteUnit = std::function<std::vector<records::CellRecord>(
    const manifest::Unit&, std::span<const manifest::Cell* const>)>;

struct RankLoopOptions {
  records::ShardWriterOptions writer;  // directory, provenance, launch pid, seq, flush policy
  std::ostream* progress = nullptr;    // progress lines (stderr), or none
};

struct RankLoopResult {
  std::size_t units_assigned = 0;
  std::size_t units_done = 0;
  std::size_t cells_assigned = 0;
  std::size_t cells_written = 0;
  std::array<std::size_t, 5> cells_by_status{};  // indexed by records::CellStatus
  bool stopped = false;                          // a stop request ended the loop early
  int stop_signal = 0;
  std::filesystem::path published;  // the published shard ("" when the rank wrote nothing)
  // Records flushed to a shard that could not be published (left as .tmp for the next launch's
  // salvage); 0 when `published` holds them all.
  std::size_t cells_unpublished = 0;
  FailureTally failures;  // distinct oom/error causes of the cells written
  // What the writer (or the loop itself) threw, after trying to publish what was written; the
  // counts above still describe what was recorded. Null when the loop ended normally.
  std::exception_ptr error;
  double seconds = 0;
  std::size_t cells_remaining() const { return cells_assigned - cells_written; }
};

// `items` are this rank's work items in execution order (ShardAssignment::per_rank[rank]);
// item.index indexes `pending`. What the writer throws (InputError/InternalError) ends the loop
// and is returned in RankLoopResult::error, after trying to publish what was written.
RankLoopResult run_rank_loop(const manifest::Manifest& manifest,
                             const manifest::Expansion& expansion,
                             std::span<const PendingUnit> pending, std::span<const WorkItem> items,
                             const ExecuteUnit& execute, RankLoopOptions options);

}  // namespace kvaudit::run
