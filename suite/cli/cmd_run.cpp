// kvaudit run MANIFEST: executes a preregistered study's cells as MPI ranks (mpirun, or srun
// --mpi=pmix; one process without a launcher is a world of one) and records them in per-rank HDF5
// shards (docs/CLI.md "kvaudit run", docs/RECORDS.md).
//
//   1. Every rank parses and expands the manifest (identically: ids depend on content only).
//      Rank 0 also checks the paths and the preregistration lock, scans the published shards for
//      done cells (resume), salvages the flushed records of dead ranks' .tmp shards and republishes
//      them in a shard of the new attempt (suite/run/resume.h). A failure on any rank makes every
//      rank exit with it (MPI_Allreduce of the exit code); nothing runs.
//   2. Rank 0 broadcasts the attempt number (1 + attempts seen), its pid (shard names) and the
//      sorted done-cell ids. Every rank computes the same LPT assignment of the pending units over
//      the current world size (suite/run/sharding.h; cost = UnitExecutor::estimated_cost scaled
//      by the fraction of the unit's cells still pending) and runs its own units longest first
//      (suite/run/rank_loop.h), printing progress to stderr.
//      Sequential calibration (certification blocks with sequential = true; suite/run/
//      sequential_schedule.h): rank 0 also broadcasts the status and score of every done cell;
//      every rank builds the same scheduler, feeds it those outcomes, and the rank loop runs the
//      calibration units in waves in the preregistered order before the LPT share of what remains
//      (cells of candidates whose test decided are dropped; they count as done). At the end rank 0
//      publishes <output_dir>/sequential/<block>.json for every block whose runs are finished.
//   3. SIGUSR1/SIGTERM/SIGINT/SIGPIPE: each rank finishes its current unit, publishes its shard and
//      stops. Rank 0 holds the study directory's run lock (suite/run/study_lock.h) from before
//      the resume scan to the end, so a second launch on the same study exits 1 at once.
//   4. Rank 0 gathers every rank's counts and failure causes (the first message of each distinct
//      failure, with its count) and prints the summary. Exit codes (the same on every
//      rank): 0 all cells recorded; 3 incomplete (stopped with cells remaining: run again to
//      resume); 1 bad input; 2 internal error.
// Device: the CPU reference backend on every rank; with the CUDA backend, local rank → device.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/errors.h"
#include "runners/cpu/cpu_isa.h"
#include "runners/model/model_error.h"
#include "suite/cli/command.h"
#include "suite/cli/compute_device.h"
#include "suite/cli/study_paths.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/prereg.h"
#include "suite/records/provenance.h"
#include "suite/records/shard_name.h"
#include "suite/run/progress.h"
#include "suite/run/rank_loop.h"
#include "suite/run/resume.h"
#include "suite/run/sequential_schedule.h"
#include "suite/run/sharding.h"
#include "suite/run/stop_signal.h"
#include "suite/run/study_lock.h"
#include "suite/run/unit_executor.h"

namespace kvaudit::cli {
namespace {

void mpi_check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, message, &length);
  throw InternalError(std::string(what) + " failed: " + std::string(message, length));
}

// MPI for the duration of the command: initialised here unless the process already did, finalised
// on the way out (also when an exception leaves the body).
class MpiSession {
 public:
  MpiSession() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;
      mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided),
                "MPI_Init_thread");
      owns_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm node;
    mpi_check(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_free(&node);
  }
  ~MpiSession() {
    if (owns_) MPI_Finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }

 private:
  bool owns_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
};

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string s(text, static_cast<std::size_t>(length));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

// The exit code an exception maps to (as run_command maps it).
int exit_code_of(const std::exception_ptr& error) {
  if (!error) return static_cast<int>(ExitCode::ok);
  try {
    std::rethrow_exception(error);
  } catch (const InputError&) {
    return static_cast<int>(ExitCode::bad_input);
  } catch (const model::ModelInputError&) {
    return static_cast<int>(ExitCode::bad_input);
  } catch (...) {
    return static_cast<int>(ExitCode::internal_error);
  }
}

// Every rank's code → the largest; the codes are ordered so that errors win (1 < 2) and
// "incomplete" (3) is decided after this call, when no rank failed.
int agree_on_code(int code) {
  int agreed = 0;
  mpi_check(MPI_Allreduce(&code, &agreed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return agreed;
}

// What rank 0 learns in phase 1 and broadcasts.
struct LaunchState {
  std::int64_t attempt = 1;
  std::int64_t launch_pid = 0;
  std::int64_t rank0_first_seq = 0;  // 1 when rank 0 used seq 0 for the salvage shard
  std::int64_t launch_id = 0;        // records::make_launch_id() as a number (8 hex digits)
  std::vector<std::uint64_t> done_cells;
  // Sequential calibration only: the status and score of every done cell (done_cells' order).
  std::vector<std::int32_t> done_status;
  std::vector<double> done_score;
};

std::string launch_id_text(std::int64_t id) {
  char text[16];
  std::snprintf(text, sizeof text, "%08llx", static_cast<unsigned long long>(id));
  return text;
}

void broadcast(LaunchState& s) {
  std::array<std::int64_t, 5> header{s.attempt, s.launch_pid, s.rank0_first_seq, s.launch_id,
                                     static_cast<std::int64_t>(s.done_cells.size())};
  mpi_check(MPI_Bcast(header.data(), 5, MPI_INT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
  s.attempt = header[0];
  s.launch_pid = header[1];
  s.rank0_first_seq = header[2];
  s.launch_id = header[3];
  s.done_cells.resize(static_cast<std::size_t>(header[4]));
  // In chunks, so that counts fit an int.
  constexpr std::size_t kChunk = 1u << 24;
  for (std::size_t offset = 0; offset < s.done_cells.size(); offset += kChunk) {
    const std::size_t n = std::min(kChunk, s.done_cells.size() - offset);
    mpi_check(MPI_Bcast(s.done_cells.data() + offset, static_cast<int>(n), MPI_UINT64_T, 0,
                        MPI_COMM_WORLD),
              "MPI_Bcast");
  }
}

// Sequential calibration: rank 0's done outcomes to every rank (after broadcast()).
void broadcast_done_outcomes(LaunchState& s) {
  s.done_status.resize(s.done_cells.size());
  s.done_score.resize(s.done_cells.size());
  constexpr std::size_t kChunk = 1u << 24;
  for (std::size_t offset = 0; offset < s.done_cells.size(); offset += kChunk) {
    const std::size_t n = std::min(kChunk, s.done_cells.size() - offset);
    mpi_check(MPI_Bcast(s.done_status.data() + offset, static_cast<int>(n), MPI_INT32_T, 0,
                        MPI_COMM_WORLD),
              "MPI_Bcast");
    mpi_check(
        MPI_Bcast(s.done_score.data() + offset, static_cast<int>(n), MPI_DOUBLE, 0, MPI_COMM_WORLD),
        "MPI_Bcast");
  }
}

records::ShardWriterOptions writer_options(const manifest::Manifest& m,
                                           const manifest::Expansion& ex, const std::string& file,
                                           const std::string& sha, const std::string& canonical,
                                           const std::filesystem::path& shards_dir,
                                           const MpiSession& mpi, const LaunchState& launch,
                                           std::uint32_t seq) {
  records::ShardWriterOptions o;
  o.directory = shards_dir;
  records::fill_process_provenance(o.provenance);
  o.provenance.manifest_sha256 = sha;
  o.provenance.manifest_path = file;
  o.provenance.n_cells_manifest = ex.cells.size();
  o.provenance.study_name = m.study.name;
  o.provenance.mpi_library_version = mpi_library_version();
  o.provenance.rank = mpi.rank();
  o.provenance.world_size = mpi.size();
  o.provenance.local_rank = mpi.local_rank();
  o.provenance.global_seed = m.study.seed;
  o.provenance.blas_core = cpu::cpu_kernel_provenance();
  o.provenance.attempt = static_cast<int>(launch.attempt);
  o.launch_pid = launch.launch_pid;
  o.launch_id = launch_id_text(launch.launch_id);
  o.seq = seq;
  o.manifest_canonical = canonical;
  return o;
}

// Per-rank counts gathered to rank 0 for the summary.
constexpr int kStats = 12;
std::array<double, kStats> stats_of(const run::RankLoopResult& r, int code) {
  return {static_cast<double>(r.units_assigned),
          static_cast<double>(r.units_done),
          static_cast<double>(r.cells_assigned),
          static_cast<double>(r.cells_written),
          static_cast<double>(r.cells_by_status[0]),
          static_cast<double>(r.cells_by_status[1]),
          static_cast<double>(r.cells_by_status[2]),
          static_cast<double>(r.cells_by_status[3]),
          static_cast<double>(r.cells_by_status[4]),
          r.seconds,
          static_cast<double>(code != 0 ? -1 : (r.stopped ? r.stop_signal : 0)),
          static_cast<double>(r.cells_unpublished)};
}

// Every rank's FailureTally text → rank 0's merged tally.
run::FailureTally gather_failures(const run::FailureTally& mine, int rank, int ranks) {
  const std::string text = mine.to_text();
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(rank == 0 ? static_cast<std::size_t>(ranks) : 0);
  mpi_check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD),
            "MPI_Gather");
  std::vector<int> offsets(lengths.size());
  int total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  mpi_check(MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                        MPI_CHAR, 0, MPI_COMM_WORLD),
            "MPI_Gatherv");
  run::FailureTally merged;
  if (rank == 0) merged.merge_text(all);
  return merged;
}

void print_run_summary(const std::vector<double>& all, int ranks, std::size_t cells_total,
                       std::size_t cells_done_before, std::int64_t attempt,
                       std::size_t salvaged_now, const run::FailureTally& failures,
                       std::size_t cells_dropped) {
  std::size_t written = 0, assigned = 0, unpublished = 0;
  std::array<std::size_t, 5> by_status{};
  int stop_signal = 0;
  bool failed = false;
  std::cerr << "kvaudit run: summary of attempt " << attempt << " over " << ranks << " rank(s):\n";
  for (int r = 0; r < ranks; ++r) {
    const double* s = &all[static_cast<std::size_t>(r) * kStats];
    const auto n = [&](int i) { return static_cast<std::size_t>(s[i]); };
    assigned += n(2);
    written += n(3);
    for (int k = 0; k < 5; ++k) by_status[static_cast<std::size_t>(k)] += n(4 + k);
    if (s[10] < 0) failed = true;
    if (s[10] > 0) stop_signal = static_cast<int>(s[10]);
    unpublished += n(11);
    std::cerr << "  rank " << r << ": units " << n(1) << "/" << n(0) << ", cells " << n(3) << "/"
              << n(2) << " (ok " << n(4) << ", oom " << n(5) << ", error " << n(6) << ", excluded "
              << n(7) << ", abandoned " << n(8) << "), " << run::format_duration(s[9])
              << (s[10] < 0 ? ", FAILED" : (s[10] > 0 ? ", stopped by a signal" : "")) << "\n";
  }
  const std::size_t remaining = assigned - written;
  const std::size_t published_now = written - unpublished;
  std::cerr << "kvaudit run: " << published_now << " cell(s) recorded now (ok " << by_status[0]
            << ", oom " << by_status[1] << ", error " << by_status[2] << ", excluded "
            << by_status[3] << ", abandoned " << by_status[4] << ")";
  if (salvaged_now > 0) std::cerr << " + " << salvaged_now << " salvaged";
  if (unpublished > 0) {
    std::cerr << "; " << unpublished
              << " more written to shard(s) that could not be published (.tmp: the next run "
                 "salvages them)";
  }
  std::cerr << "; " << cells_done_before + published_now << " of " << cells_total
            << " cells recorded in all";
  if (cells_dropped > 0) {
    std::cerr << " (+ " << cells_dropped
              << " not needed: dropped by sequential calibration after their test decided)";
  }
  if (remaining > 0) {
    std::cerr << "; " << remaining << " remain";
    if (stop_signal != 0) std::cerr << " (stopped by " << strsignal(stop_signal) << ")";
    if (!failed) std::cerr << ": run again to resume";
  }
  std::cerr << "\n";
  if (!failures.empty()) {
    std::cerr << "kvaudit run: " << failures.n_failed()
              << " cell(s) failed; first cause of each distinct failure (a later `kvaudit run "
                 "--retry-failed` runs them again):\n"
              << failures.describe();
  }
}

int run_study(const po::variables_map& vm) {
  // A stop signal (SIGUSR1/SIGTERM/SIGINT/SIGPIPE) is a clean stop from here on, MPI_Init
  // included: the flag is set, phase 1 runs, no unit starts, the launch exits 3. Installed before
  // MPI_Init because starting up (loading the CUDA libraries, MPI_Init itself) can take seconds on
  // a loaded node, and a Slurm --signal or preemption that arrives then must not kill the rank.
  run::install_stop_handlers();
  MpiSession mpi;
  const std::string file = vm["manifest"].as<std::string>();
  const bool root = mpi.rank() == 0;
  run::ResumeOptions resume_options;
  resume_options.retry_failed = vm.count("retry-failed") > 0;
  resume_options.salvage_corrupt = vm.count("salvage-corrupt") > 0;
  std::optional<run::StudyDirectoryLock> study_lock;  // rank 0, held to the end of the launch
  std::size_t salvaged_now = 0;

  // Phase 1: parse and expand everywhere; lock, resume scan and salvage on rank 0.
  std::optional<manifest::Manifest> m;
  manifest::Expansion ex;
  std::string sha, canonical;
  std::filesystem::path shards_dir;
  LaunchState launch;
  std::vector<run::SequentialPlan> sequential_plans;  // empty: no block has sequential = true
  std::exception_ptr error;
  try {
    m = manifest::load_manifest(file);
    ex = manifest::expand(*m);
    sha = manifest::manifest_sha256(*m);
    canonical = manifest::canonical_text(*m);
    const auto out = study_output_dir(*m, vm);
    shards_dir = out / "shards";
    sequential_plans = run::plan_sequential_calibration(*m, ex);
    if (root) {
      require_paths_exist(*m, "nothing was run");
      const auto lock = manifest::require_prereg_match(out, file, sha);
      study_lock.emplace(out);  // before the fingerprints: a second launch fails at once
      // The models and data must be the files the lock fingerprinted (before any shard exists).
      manifest::require_same_inputs(lock, out / manifest::kPreregFile, *m,
                                    manifest::AbsentInput::refuse, "nothing was run", std::cerr);
      std::cerr << "kvaudit run: " << file << " matches its preregistration ("
                << (out / manifest::kPreregFile).string() << ", sha256 " << sha
                << (lock.contains("inputs") ? "; models and data unchanged" : "") << ")\n";
      const auto scan = run::scan_for_resume(shards_dir, sha, resume_options);
      for (const auto& line : scan.messages) std::cerr << "kvaudit run: " << line << "\n";
      launch.attempt = scan.previous_attempts + 1;
      launch.launch_pid = static_cast<std::int64_t>(::getpid());
      launch.launch_id =
          static_cast<std::int64_t>(std::stoull(records::make_launch_id(), nullptr, 16));
      if (scan.failed_to_retry > 0) {
        std::cerr << "kvaudit run: --retry-failed: " << scan.failed_to_retry
                  << " cell(s) recorded as oom or error will run again\n";
      }
      launch.done_cells = scan.done_cells;
      if (!sequential_plans.empty()) {
        for (const auto& done : scan.done_records) {
          launch.done_status.push_back(static_cast<std::int32_t>(done.status));
          launch.done_score.push_back(done.score);
        }
      }
      if (!scan.backend_keyed_random_shard.empty()) {
        std::size_t pending_random = 0;
        for (const manifest::Cell& cell : ex.cells) {
          if (cell.method < 0 ||
              m->methods[static_cast<std::size_t>(cell.method)].method != "random")
            continue;
          if (!std::binary_search(scan.done_cells.begin(), scan.done_cells.end(), cell.id))
            ++pending_random;
        }
        run::require_same_random_keys(scan, pending_random, shards_dir);
      }
      if (!scan.salvaged.empty()) {
        const auto path = run::publish_salvaged_records(
            scan.salvaged, scan.salvaged_from,
            writer_options(*m, ex, file, sha, canonical, shards_dir, mpi, launch, 0));
        launch.rank0_first_seq = 1;
        salvaged_now = scan.salvaged.size();
        std::cerr << "kvaudit run: republished " << scan.salvaged.size()
                  << " salvaged record(s) in " << path.filename().string() << "\n";
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  if (const int code = agree_on_code(exit_code_of(error)); code != 0) {
    if (error) std::rethrow_exception(error);  // printed by run_command on the failing rank(s)
    return code;
  }

  // Phase 2: the same plan on every rank.
  broadcast(launch);
  std::size_t unknown_done = 0;
  const auto pending = run::pending_units(ex, launch.done_cells, &unknown_done);
  // LPT over the ranks of the given pending units; cost scaled by the fraction still pending.
  const auto assign = [&](const std::vector<run::PendingUnit>& units) {
    std::vector<run::WorkItem> work;
    for (std::size_t i = 0; i < units.size(); ++i) {
      const auto& unit = ex.units[units[i].unit];
      const double fraction = static_cast<double>(units[i].cells.size()) /
                              static_cast<double>(std::max<std::uint32_t>(1, unit.n_cells));
      work.push_back({unit.id, i, run::UnitExecutor::estimated_cost(*m, unit) * fraction});
    }
    return run::assign_longest_first(work, mpi.size());
  };
  std::size_t pending_cells = 0;
  for (const auto& unit : pending) pending_cells += unit.cells.size();
  const auto assignment = assign(pending);
  const std::size_t done_before = launch.done_cells.size() - unknown_done;
  // Sequential calibration: the same scheduler on every rank, fed the done cells' outcomes (the
  // tests resume where the records leave them; cells of decided candidates are dropped).
  std::optional<run::SequentialScheduler> scheduler;
  std::size_t dropped_before = 0;
  std::size_t pending_units_left = pending.size();
  if (!sequential_plans.empty()) {
    broadcast_done_outcomes(launch);
    const auto never_drop = run::fixed_n_calibration_cells(*m, ex);
    scheduler.emplace(std::move(sequential_plans), ex, pending, never_drop);
    std::unordered_map<std::uint64_t, std::size_t> cell_index;
    cell_index.reserve(ex.cells.size());
    for (std::size_t c = 0; c < ex.cells.size(); ++c) cell_index.emplace(ex.cells[c].id, c);
    std::vector<run::CellOutcome> done;
    done.reserve(launch.done_cells.size());
    for (std::size_t i = 0; i < launch.done_cells.size(); ++i) {
      const auto it = cell_index.find(launch.done_cells[i]);
      if (it == cell_index.end()) continue;
      done.push_back({it->second, static_cast<records::CellStatus>(launch.done_status[i]),
                      launch.done_score[i]});
    }
    scheduler->observe(done);
    dropped_before = scheduler->dropped_cells().size();
    // What is left to run once the decided candidates' cells are dropped (for the message).
    const auto left = scheduler->remaining(pending);
    pending_cells = 0;
    for (const auto& unit : left) pending_cells += unit.cells.size();
    pending_units_left = left.size();
  }
  if (root) {
    std::cerr << "kvaudit run: attempt " << launch.attempt << ": " << ex.cells.size()
              << " cells in " << ex.units.size() << " units; " << done_before
              << " already recorded; " << pending_cells << " cells in " << pending_units_left
              << " units to run on " << mpi.size() << " rank(s)"
              << (mpi.size() > 1 ? " (LPT by estimated cost)" : "") << "\n";
    if (unknown_done > 0)
      std::cerr << "kvaudit run: " << unknown_done
                << " recorded cell id(s) are not in the manifest's expansion (ignored)\n";
    if (scheduler) {
      std::cerr << "kvaudit run: sequential calibration of " << scheduler->plans().size()
                << " certification run(s) first, in waves of " << mpi.size() << " unit(s)";
      if (dropped_before > 0)
        std::cerr << "; " << dropped_before
                  << " pending cell(s) already dropped (their candidates' tests decided)";
      std::cerr << "\n";
    }
  }

  // Phase 3: this rank's units.
  run::RankLoopResult result;
  int code = 0;
  try {
    const ComputeDevice device =
        choose_compute_device(vm["device"].as<std::string>(), mpi.local_rank());
    std::cerr << "kvaudit run [rank " << mpi.rank() << "]: " << device.description << "\n";
    run::UnitExecutorOptions exec_options;
    exec_options.rank = mpi.rank();
    exec_options.attempt = static_cast<std::int32_t>(launch.attempt);
    exec_options.use_gpu = device.gpu;
    run::UnitExecutor executor(*m, ex, exec_options);
    run::RankLoopOptions loop;
    loop.writer = writer_options(*m, ex, file, sha, canonical, shards_dir, mpi, launch,
                                 root ? static_cast<std::uint32_t>(launch.rank0_first_seq) : 0);
    record_compute_device(device, loop.writer.provenance);
    loop.progress = &std::cerr;
    if (scheduler) {
      loop.sequential = run::SequentialPhase{
          &*scheduler, run::mpi_wave_exchange(),
          [&assign, &mpi](const std::vector<run::PendingUnit>& remaining) {
            return assign(remaining).per_rank[static_cast<std::size_t>(mpi.rank())];
          }};
    }
    result = run::run_rank_loop(
        *m, ex, pending, assignment.per_rank[static_cast<std::size_t>(mpi.rank())],
        [&executor](const manifest::Unit& u, std::span<const manifest::Cell* const> cells) {
          return executor.execute(u, cells);
        },
        std::move(loop));
    if (result.error) std::rethrow_exception(result.error);
  } catch (...) {
    error = std::current_exception();
    code = exit_code_of(error);
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      std::cerr << "kvaudit run [rank " << mpi.rank()
                << "]: " << (code == 1 ? "" : "internal error: ") << e.what() << "\n";
    } catch (...) {
      std::cerr << "kvaudit run [rank " << mpi.rank() << "]: unknown internal error\n";
    }
  }

  // Sequential calibration: once no rank failed, rank 0 publishes the decisions of the finished
  // blocks (a file that exists must hold the same decisions).
  std::size_t cells_dropped = 0;
  if (scheduler) {
    cells_dropped = scheduler->dropped_cells().size();
    if (agree_on_code(code) == 0 && root) {
      try {
        for (const auto& path : scheduler->publish_decisions(study_output_dir(*m, vm))) {
          std::cerr << "kvaudit run: sequential decisions written to " << path.string() << "\n";
        }
        for (std::size_t p = 0; p < scheduler->plans().size(); ++p) {
          const auto& plan = scheduler->plans()[p];
          std::cerr << "kvaudit run: sequential " << plan.name << ": "
                    << scheduler->requests_observed(p) << " of " << plan.units.size()
                    << " calibration request(s) observed";
          for (std::size_t j = 0; j < plan.candidate_ids.size(); ++j) {
            const auto& c = scheduler->candidates(p)[j];
            std::cerr << "; " << plan.candidate_ids[j] << " "
                      << (c.stopped_early
                              ? std::string("stopped (an earlier candidate failed)")
                              : std::string(stats::sequential_decision_name(c.decision)))
                      << " after " << c.requests_used;
          }
          std::cerr << "\n";
        }
      } catch (...) {
        error = std::current_exception();
        code = exit_code_of(error);
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          std::cerr << "kvaudit run: " << (code == 1 ? "" : "internal error: ") << e.what() << "\n";
        } catch (...) {
          std::cerr << "kvaudit run: unknown internal error\n";
        }
      }
    }
  }

  // Phase 4: summary and the common exit code.
  const auto mine = stats_of(result, code);
  std::vector<double> all(root ? static_cast<std::size_t>(mpi.size()) * kStats : 0);
  mpi_check(MPI_Gather(mine.data(), kStats, MPI_DOUBLE, all.data(), kStats, MPI_DOUBLE, 0,
                       MPI_COMM_WORLD),
            "MPI_Gather");
  unsigned long long remaining_mine = result.cells_assigned - result.cells_written;
  if (code != 0) remaining_mine = 0;
  unsigned long long remaining = 0;
  mpi_check(MPI_Allreduce(&remaining_mine, &remaining, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM,
                          MPI_COMM_WORLD),
            "MPI_Allreduce");
  const int agreed = agree_on_code(code);
  const run::FailureTally failures = gather_failures(result.failures, mpi.rank(), mpi.size());
  if (root) {
    print_run_summary(all, mpi.size(), ex.cells.size(), done_before, launch.attempt, salvaged_now,
                      failures, cells_dropped);
  }
  run::restore_stop_handlers();
  if (agreed != 0) return agreed;
  if (remaining > 0) return static_cast<int>(ExitCode::incomplete);
  return static_cast<int>(ExitCode::ok);
}

}  // namespace

Command run_stage_command() {
  Command c;
  c.name = "run";
  c.summary = "run a preregistered study's cells (under mpirun or srun) and record them";
  c.usage =
      "kvaudit run MANIFEST [--output-dir DIR] [--device auto|cpu|cuda] [--retry-failed] "
      "[--salvage-corrupt]";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("manifest", po::value<std::string>()->required(), "the study manifest (TOML)")(
        "output-dir", po::value<std::string>(),
        "the study directory given to plan, if not study.output_dir (shards go to DIR/shards)")(
        "device", po::value<std::string>()->default_value("auto"),
        "auto | cpu | cuda: one rank per GPU (node-local rank picks the device); auto uses a GPU "
        "when one is visible; bf16 models run on the GPU, f32 models on the CPU")(
        "retry-failed",
        "run again the cells recorded as oom or error (the new records replace the failed ones)")(
        "salvage-corrupt",
        "use the records of damaged shards whose record digests still match, instead of stopping "
        "at a shard that fails its checksum");
    p.add("manifest", 1);
  };
  c.body = [](const po::variables_map& vm) { return run_study(vm); };
  return c;
}

}  // namespace kvaudit::cli
