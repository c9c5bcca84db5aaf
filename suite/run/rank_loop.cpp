// The per-rank execution loop (see rank_loop.h).
#include "suite/run/rank_loop.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "base/errors.h"
#include "suite/common/utc_time.h"
#include "suite/run/cell_identity.h"
#include "suite/run/progress.h"
#include "suite/run/stop_signal.h"

namespace kvaudit::run {
namespace {

// One failure record per cell of a unit that threw.
std::vector<records::CellRecord> failure_records(const manifest::Manifest& manifest,
                                                 const manifest::Unit& unit,
                                                 std::span<const manifest::Cell* const> cells,
                                                 records::CellStatus status,
                                                 const std::string& message, std::int64_t t0,
                                                 std::int64_t t1) {
  std::vector<records::CellRecord> out;
  out.reserve(cells.size());
  for (const manifest::Cell* cell : cells) {
    records::CellRecord r = cell_identity_record(manifest, unit, *cell);
    r.status = status;
    r.error = message;
    r.t_start_ns = t0;
    r.t_end_ns = t1;
    out.push_back(std::move(r));
  }
  return out;
}

void check_records_match(const std::vector<records::CellRecord>& got,
                         std::span<const manifest::Cell* const> cells, const manifest::Unit& unit) {
  // Per cell in the given order: one record, or under reuse its questions 0 … n−1 in order.
  std::size_t at = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const std::uint32_t n = at < got.size() ? std::max(got[at].n_questions, 1u) : 1u;
    for (std::uint32_t j = 0; j < n; ++j, ++at) {
      if (at >= got.size()) {
        throw InternalError("unit " + std::to_string(unit.id) + ": the executor returned " +
                            std::to_string(got.size()) + " records for " +
                            std::to_string(cells.size()) + " cells");
      }
      if (got[at].cell_id != cells[i]->id || got[at].unit_id != unit.id || got[at].question != j ||
          std::max(got[at].n_questions, 1u) != n) {
        throw InternalError("unit " + std::to_string(unit.id) + ": record " + std::to_string(at) +
                            " is for cell " + std::to_string(got[at].cell_id) + " question " +
                            std::to_string(got[at].question) + ", expected cell " +
                            std::to_string(cells[i]->id) + " question " + std::to_string(j));
      }
    }
  }
  if (at != got.size()) {
    throw InternalError("unit " + std::to_string(unit.id) + ": the executor returned " +
                        std::to_string(got.size()) + " records for " +
                        std::to_string(cells.size()) + " cells");
  }
}

}  // namespace

RankLoopResult run_rank_loop(const manifest::Manifest& manifest,
                             const manifest::Expansion& expansion,
                             std::span<const PendingUnit> pending, std::span<const WorkItem> items,
                             const ExecuteUnit& execute, RankLoopOptions options) {
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  RankLoopResult result;
  const auto count_assigned = [&] {
    result.units_assigned += items.size();
    double cost = 0;
    for (const auto& item : items) {
      result.cells_assigned += pending[item.index].cells.size();
      cost += item.cost;
    }
    return cost;
  };
  const int rank = options.writer.provenance.rank;
  const int world_size = options.writer.provenance.world_size;
  const int attempt = options.writer.provenance.attempt;
  std::unique_ptr<records::ShardWriter> writer;

  const auto publish = [&] {
    if (writer) result.published = writer->close_and_publish();
    writer.reset();
  };

  // One unit with the given cells (indices into Expansion::cells): execute (an exception becomes
  // one oom/error record per cell), check, append to the lazily created shard, flush.
  const auto run_unit = [&](std::size_t unit_index, std::span<const std::size_t> cell_indices) {
    const manifest::Unit& unit = expansion.units.at(unit_index);
    std::vector<const manifest::Cell*> cells;
    cells.reserve(cell_indices.size());
    for (std::size_t c : cell_indices) cells.push_back(&expansion.cells.at(c));

    if (!writer) writer = std::make_unique<records::ShardWriter>(options.writer);

    const std::int64_t t0 = unix_time_ns();
    std::vector<records::CellRecord> produced;
    try {
      produced = execute(unit, cells);
    } catch (const std::bad_alloc&) {
      produced = failure_records(manifest, unit, cells, records::CellStatus::oom,
                                 "out of memory while running the unit", t0, unix_time_ns());
    } catch (const std::exception& e) {
      produced = failure_records(manifest, unit, cells, records::CellStatus::error,
                                 std::string("unit failed: ") + e.what(), t0, unix_time_ns());
    }
    check_records_match(produced, cells, unit);
    for (auto& record : produced) {
      record.rank = rank;
      record.attempt = attempt;
      writer->append(record);
      // Cells, not records: a reuse cell's k records count once (by its question 0's status).
      if (record.question == 0) {
        ++result.cells_by_status.at(static_cast<std::size_t>(record.status));
        ++result.cells_written;
      }
      result.failures.add(record);
    }
    writer->flush();
    ++result.units_done;
    return produced;
  };

  try {
    // Sequential calibration first (every rank, collectively), then this rank's share of the rest.
    std::vector<PendingUnit> remaining;
    std::vector<WorkItem> reassigned;
    if (options.sequential) {
      SequentialPhase& phase = *options.sequential;
      if (phase.scheduler == nullptr || !phase.exchange || !phase.reassign) {
        throw InternalError(
            "run_rank_loop: the sequential phase lacks its scheduler, exchange or "
            "reassignment");
      }
      // The exchange never sees an exception from here: a failure of this rank's wave unit is
      // kept, its cells are reported as errors (the launch fails, nothing is published from
      // them) and the waves stop on every rank at the next exchange.
      std::exception_ptr wave_error;
      std::size_t observed = 0;  // outcomes of all ranks received in the waves
      const RunWaveUnit wave_unit = [&](std::size_t unit_index,
                                        std::span<const std::size_t> cell_indices) {
        const double t = elapsed();
        try {
          auto produced = run_unit(unit_index, cell_indices);
          if (options.progress != nullptr) {
            *options.progress << "kvaudit run [rank " << rank << "/" << world_size
                              << "] sequential calibration: unit "
                              << expansion.units.at(unit_index).id << ", " << produced.size()
                              << " cells, " << format_duration(elapsed() - t) << std::endl;
          }
          return produced;
        } catch (...) {
          if (!wave_error) wave_error = std::current_exception();
          const manifest::Unit& unit = expansion.units.at(unit_index);
          std::vector<const manifest::Cell*> cells;
          for (std::size_t c : cell_indices) cells.push_back(&expansion.cells.at(c));
          return failure_records(manifest, unit, cells, records::CellStatus::error,
                                 "the unit's records could not be written", 0, 0);
        }
      };
      const WaveExchange counting = [&](std::span<const std::size_t> wave,
                                        std::vector<CellOutcome> mine, bool& stop) {
        auto all = phase.exchange(wave, std::move(mine), stop);
        observed += all.size();
        return all;
      };
      const auto waves =
          run_sequential_waves(*phase.scheduler, pending, rank, world_size, wave_unit, counting,
                               [&] { return wave_error != nullptr || stop_requested(); });
      result.sequential_waves = waves.waves;
      result.units_assigned = waves.units_run;
      result.cells_assigned = waves.cells_run;
      if (wave_error) std::rethrow_exception(wave_error);
      if (waves.stopped) {
        // Rank 0 carries every cell still to run, so that the launch reports them (exit 3).
        if (rank == 0) {
          std::size_t left = 0;
          for (const auto& unit : pending) left += unit.cells.size();
          std::size_t dropped = 0;
          for (const auto& unit : pending) {
            dropped += unit.cells.size() - phase.scheduler->cells_to_run(unit.cells).size();
          }
          result.cells_assigned += left - observed - dropped;
        }
        result.stopped = true;
        result.stop_signal = stop_signal_number();
        publish();
        result.seconds = elapsed();
        return result;
      }
      remaining = phase.scheduler->remaining(pending);
      reassigned = phase.reassign(remaining);
      pending = remaining;
      items = reassigned;
    }
    const double total_cost = count_assigned();
    ProgressMeter meter(rank, world_size, items.size(),
                        result.cells_assigned - result.cells_written, total_cost);
    for (const auto& item : items) {
      if (stop_requested()) {
        result.stopped = true;
        result.stop_signal = stop_signal_number();
        break;
      }
      const PendingUnit& unit_work = pending[item.index];
      const auto produced = run_unit(unit_work.unit, unit_work.cells);
      meter.unit_done(produced.size(), item.cost, elapsed());
      if (options.progress != nullptr) *options.progress << meter.line() << std::endl;
    }
    publish();
  } catch (...) {
    // Keep what was written: publish it if possible, else leave the .tmp for salvage.
    result.error = std::current_exception();
    try {
      publish();
    } catch (...) {
      result.cells_unpublished = result.cells_written;
    }
  }
  result.seconds = elapsed();
  return result;
}

}  // namespace kvaudit::run
