// Sequential calibration in `kvaudit run` (manifest `sequential = true`; issue 17 item 3;
// docs/design/sequential.md §Run side): the calibration units of sequential certification runs
// are executed first, in their preregistered random order (suite/reduce/sequential_calibration.h),
// in waves of world_size units; after each wave the anytime-valid tests
// (statistics/sequential_test.h) advance over the requests whose records are in, and the cells of
// candidates whose test stopped are dropped from every later unit (the unit still runs its other
// cells). What remains (units of non-sequential work, calibration units past the stops, test
// units) then goes to the usual LPT sharding with the dropped cells removed.
//
// Everything here is a pure, deterministic function of (manifest, expansion, pending cells, the
// cell outcomes observed): every rank keeps an identical SequentialScheduler and feeds it the same
// outcomes (all ranks' records of the wave, MPI_Allgatherv in cmd_run), so all ranks agree on the
// drops without a broadcast; rank 0 alone publishes the decisions,
// <output_dir>/sequential/<block>.json (write_new_file: never replaced).
//
// Resume: construct the scheduler from the pending units of the resume scan and observe() the
// outcomes of every done cell (published + salvaged records). Feeding is strictly in order and a
// test's state after position p depends only on the outcomes up to p, so the scheduler reaches the
// same decisions as the interrupted launch, drops the same cells, and reduce's replay
// (reduce::replay_sequential_calibration over the same records) gives the same decisions too.
// Cells a wave ran after its candidate's decision are recorded but never read by the tests.
//
// Loss of request p for candidate j (the same rule as reduce, sequential_loss): the full-KV cell
// excluded → the request leaves n (no test observes it); the full-KV or candidate cell failed
// (oom, error, abandoned, ok without a finite score) or excluded → loss 1 (worst case); else
// sequential_loss(risk, τ, full score, candidate score).
// Scope: one risk per block (violation or mean_loss, at ε or loss_epsilon) and the fixed
// sequence; plan_sequential_calibration refuses other contracts with sequential = true.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "statistics/sequential_test.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest.h"
#include "suite/records/cell_record.h"
#include "suite/reduce/sequential_calibration.h"
#include "suite/run/resume.h"

namespace kvaudit::run {

// One sequential certification run: (block, model).
struct SequentialPlan {
  std::string name;       // "<block>/<model>" (messages); the order is keyed by block_name
  std::size_t block = 0;  // index into Manifest::certifications
  std::string block_name;
  std::string model_name;
  reduce::SequentialRisk risk = reduce::SequentialRisk::violation;
  double tau = 0, epsilon = 0, delta = 0;  // epsilon: the level of `risk`
  std::vector<std::string> candidate_ids;  // "<method>@<budget>", preregistered order
  // Position p of the preregistered order: the unit (index into Expansion::units), its full-KV
  // cell and candidate j's cell (indices into Expansion::cells).
  std::vector<std::size_t> units;
  std::vector<std::size_t> reference_cells;
  std::vector<std::vector<std::size_t>> candidate_cells;  // [candidate][position]
  std::vector<std::size_t> canonical_index;  // position → request index in (task, instance) order
};

// The plans of every block with sequential = true, for every model of its grid. Throws InputError
// (naming the block) for a sequential block with more than one risk, a procedure other than
// fixed_sequence, or per_task; InternalError when a candidate cell is not in the expansion.
std::vector<SequentialPlan> plan_sequential_calibration(const manifest::Manifest& manifest,
                                                        const manifest::Expansion& expansion);

// The calibration candidate cells of certification blocks *without* sequential = true (sorted,
// unique): a fixed-n block may share cells with a sequential one (same method, budgets, protocol),
// and those cells must never be dropped.
std::vector<std::size_t> fixed_n_calibration_cells(const manifest::Manifest& manifest,
                                                   const manifest::Expansion& expansion);

// The result of one cell, as the scheduler needs it (from its record).
struct CellOutcome {
  std::size_t cell = 0;  // index into Expansion::cells
  records::CellStatus status = records::CellStatus::ok;
  double score = 0;
};
CellOutcome cell_outcome(std::size_t cell, const records::CellRecord& record);

struct SequentialCandidateState {
  stats::SequentialDecision decision = stats::SequentialDecision::undecided;
  std::int64_t requests_used = 0;
  double e_value = 1;
  bool stopped_early = false;  // an earlier candidate can no longer certify
  bool certified = false;      // fixed sequence (meaningful once the plan is finished)
  bool dropped = false;        // its cells after the stop were released (scheduler bookkeeping)
  bool running() const {
    return decision == stats::SequentialDecision::undecided && !stopped_early;
  }
};

class SequentialScheduler {
 public:
  // `pending`: the units with cells still to run (resume.h pending_units), in unit order.
  // `never_drop`: cells other analyses need (fixed_n_calibration_cells), never dropped.
  SequentialScheduler(std::vector<SequentialPlan> plans, const manifest::Expansion& expansion,
                      std::span<const PendingUnit> pending,
                      std::span<const std::size_t> never_drop = {});

  // The next wave: up to `world_size` units (indices into Expansion::units), taken round-robin
  // over the plans that still have running candidates, each plan in its preregistered order,
  // skipping positions none of whose needed cells (full-KV + running candidates) is pending.
  // A unit is issued once. Empty when the sequential phase is over.
  std::vector<std::size_t> next_wave(std::size_t world_size);

  // The cells of `unit` to run now: `cells` (pending, ascending) minus the dropped ones.
  std::vector<std::size_t> cells_to_run(std::span<const std::size_t> cells) const;

  // Records the outcomes (any order, any cells) and advances every plan's tests as far as the
  // outcomes allow, in preregistered order; drops the later cells of candidates that stopped.
  void observe(std::span<const CellOutcome> outcomes);

  // True when no plan has a running candidate with an unissued position.
  bool finished() const;

  // The pending units for the LPT phase: dropped cells removed, units issued in waves removed
  // (they ran), units left without cells removed.
  std::vector<PendingUnit> remaining(std::span<const PendingUnit> pending) const;

  // Sorted indices into Expansion::cells that must not run.
  std::vector<std::size_t> dropped_cells() const;

  const std::vector<SequentialPlan>& plans() const { return plans_; }
  const std::vector<SequentialCandidateState>& candidates(std::size_t plan) const {
    return state_.at(plan).candidates;
  }
  std::int64_t positions_observed(std::size_t plan) const { return state_.at(plan).cursor; }
  std::int64_t requests_observed(std::size_t plan) const { return state_.at(plan).n; }

  // The decisions of every plan of `block` as JSON (one object; deterministic text, no times).
  std::string decisions_json(std::size_t block) const;

  // Rank 0: writes <output_dir>/sequential/<block name>.json for every block whose plans are all
  // finished, unless the file exists with the same content; throws InputError naming the file
  // when it exists with other content (the records changed since it was written).
  // Returns the files written.
  std::vector<std::filesystem::path> publish_decisions(
      const std::filesystem::path& output_dir) const;

 private:
  struct PlanState {
    std::vector<stats::SequentialRiskTest> tests;
    std::vector<SequentialCandidateState> candidates;
    std::int64_t cursor = 0;  // positions fed (or skipped as excluded)
    std::int64_t n = 0;       // requests observed (not excluded)
    std::size_t issued = 0;   // positions considered by next_wave
  };
  bool any_running(std::size_t p) const;
  bool plan_finished(std::size_t p) const;
  bool position_needs_run(std::size_t p, std::size_t position) const;
  void advance(std::size_t p);
  void drop_after(std::size_t p, std::size_t j, std::size_t from);

  std::vector<SequentialPlan> plans_;
  std::vector<PlanState> state_;
  std::vector<std::uint8_t> pending_cell_;           // per cell of the expansion
  std::vector<std::uint8_t> dropped_;                // per cell
  std::vector<std::uint8_t> issued_unit_;            // per unit
  std::vector<std::optional<CellOutcome>> outcome_;  // per cell
  // Per cell: (plan, candidate, position) triples of running candidates that may still need it.
  std::vector<std::uint32_t> needers_;
  std::size_t next_plan_ = 0;  // round-robin start
};

// ---- The wave loop of one rank (what run_rank_loop calls before its LPT items) ----

// Runs one unit with the given cells (indices into Expansion::cells, ascending) the way the rank
// loop runs any unit — execute, failure records for an exception, append to the shard, flush —
// and returns its records, one per cell in the order given.
using RunWaveUnit = std::function<std::vector<records::CellRecord>(
    std::size_t unit, std::span<const std::size_t> cells)>;

// Collective over the ranks: takes this rank's outcomes of the wave and its stop request, returns
// every rank's outcomes of the wave (rank order) and sets `stop` when any rank asked to stop.
// cmd_run passes mpi_wave_exchange(); tests pass a fake.
using WaveExchange = std::function<std::vector<CellOutcome>(
    std::span<const std::size_t> wave, std::vector<CellOutcome> mine, bool& stop)>;

struct WaveLoopResult {
  std::size_t waves = 0;
  std::size_t units_run = 0;  // by this rank
  std::size_t cells_run = 0;  // by this rank
  bool stopped = false;       // a stop request (any rank) ended the phase early
};

// Every rank calls this with identical schedulers; wave w's unit r runs on rank r (ranks beyond
// the wave's size only exchange). After each wave all ranks observe the same outcomes, so they
// agree on the next wave and on the dropped cells. `stop_requested` is polled before each wave.
// `pending` is the launch's pending units (the scheduler's constructor argument).
WaveLoopResult run_sequential_waves(SequentialScheduler& scheduler,
                                    std::span<const PendingUnit> pending, int rank, int world_size,
                                    const RunWaveUnit& run_unit, const WaveExchange& exchange,
                                    const std::function<bool()>& stop_requested);

// The MPI exchange over MPI_COMM_WORLD: MPI_Allreduce (MAX) of the stop flag, MPI_Allgather of the
// outcome counts, MPI_Allgatherv of (cell index, status, score) triples. Call after MPI_Init.
WaveExchange mpi_wave_exchange();

}  // namespace kvaudit::run
