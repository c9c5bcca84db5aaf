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
//     (cells_unpublished says how many cells' records it holds).
//   * Sequential calibration (RankLoopOptions::sequential, set only when a certification block has
//     sequential = true; suite/run/sequential_schedule.h): before its own items the rank takes
//     part in the waves of calibration units (run_sequential_waves; unit r of a wave on rank r,
//     the outcomes exchanged after each wave), running each wave unit exactly like an item. Then
//     what remains (scheduler.remaining(pending): dropped cells and wave units removed) is
//     re-sharded (`reassign`) and the rank runs its share. A stop request during the waves ends
//     them on every rank after the current wave. The wave body never throws (a rank that threw
//     would leave the others waiting in the exchange): a writer error stops the waves on every
//     rank after the next exchange and is returned in RankLoopResult::error.
#pragma once

#include <array>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <vector>

#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest.h"
#include "suite/records/cell_record.h"
#include "suite/records/shard_writer.h"
#include "suite/run/failure_tally.h"
#include "suite/run/resume.h"
#include "suite/run/sequential_schedule.h"
#include "suite/run/sharding.h"

namespace kvaudit::run {

// Runs one unit for the given cells; returns one record per cell, in the order given.
using ExecuteUnit = std::function<std::vector<records::CellRecord>(
    const manifest::Unit&, std::span<const manifest::Cell* const>)>;

// The sequential calibration phase of the rank loop (see above).
struct SequentialPhase {
  SequentialScheduler* scheduler = nullptr;  // identical on every rank, fed the done outcomes
  WaveExchange exchange;                     // mpi_wave_exchange() (tests: a fake)
  // The LPT share of this rank of the given remaining units (item.index indexes them).
  std::function<std::vector<WorkItem>(const std::vector<PendingUnit>&)> reassign;
};

struct RankLoopOptions {
  records::ShardWriterOptions writer;  // directory, provenance, launch pid, seq, flush policy
  std::ostream* progress = nullptr;    // progress lines (stderr), or none
  std::optional<SequentialPhase> sequential;  // none: no sequential block (the items only)
};

struct RankLoopResult {
  // With a sequential phase: the wave units this rank ran plus its share of what remained; a
  // stop during the waves adds, on rank 0, every cell left to run (dropped cells never count).
  std::size_t units_assigned = 0;
  std::size_t units_done = 0;
  std::size_t cells_assigned = 0;
  std::size_t cells_written = 0;  // cells, not records (a reuse cell writes one per question)
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
  std::size_t sequential_waves = 0;  // waves this rank took part in (0 without a phase)
  std::size_t cells_remaining() const { return cells_assigned - cells_written; }
};

// `items` are this rank's work items in execution order (ShardAssignment::per_rank[rank]);
// item.index indexes `pending`. With options.sequential, `pending` is the launch's pending units
// (the scheduler's) and `items` is ignored: the items come from reassign after the waves. What the
// writer throws (InputError/InternalError) ends the loop and is returned in RankLoopResult::error,
// after trying to publish what was written.
RankLoopResult run_rank_loop(const manifest::Manifest& manifest,
                             const manifest::Expansion& expansion,
                             std::span<const PendingUnit> pending, std::span<const WorkItem> items,
                             const ExecuteUnit& execute, RankLoopOptions options);

}  // namespace kvaudit::run
