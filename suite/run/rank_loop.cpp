// The per-rank execution loop (see rank_loop.h).
#include "suite/run/rank_loop.h"

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
  if (got.size() != cells.size()) {
    throw InternalError("unit " + std::to_string(unit.id) + ": the executor returned " +
                        std::to_string(got.size()) + " records for " +
                        std::to_string(cells.size()) + " cells");
  }
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (got[i].cell_id != cells[i]->id || got[i].unit_id != unit.id) {
      throw InternalError("unit " + std::to_string(unit.id) + ": record " + std::to_string(i) +
                          " is for cell " + std::to_string(got[i].cell_id) + ", expected cell " +
                          std::to_string(cells[i]->id));
    }
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
  result.units_assigned = items.size();
  double total_cost = 0;
  for (const auto& item : items) {
    result.cells_assigned += pending[item.index].cells.size();
    total_cost += item.cost;
  }
  const int rank = options.writer.provenance.rank;
  const int attempt = options.writer.provenance.attempt;
  ProgressMeter meter(rank, options.writer.provenance.world_size, items.size(),
                      result.cells_assigned, total_cost);
  std::unique_ptr<records::ShardWriter> writer;

  const auto publish = [&] {
    if (writer) result.published = writer->close_and_publish();
    writer.reset();
  };

  try {
    for (const auto& item : items) {
      if (stop_requested()) {
        result.stopped = true;
        result.stop_signal = stop_signal_number();
        break;
      }
      const PendingUnit& unit_work = pending[item.index];
      const manifest::Unit& unit = expansion.units.at(unit_work.unit);
      std::vector<const manifest::Cell*> cells;
      cells.reserve(unit_work.cells.size());
      for (std::size_t c : unit_work.cells) cells.push_back(&expansion.cells.at(c));

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
        ++result.cells_by_status.at(static_cast<std::size_t>(record.status));
        result.failures.add(record);
      }
      writer->flush();
      result.cells_written += produced.size();
      ++result.units_done;
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
