// Sequential waves under a real mpirun (suite/run/sequential_schedule.h, mpi_wave_exchange): every
// rank runs its unit of each wave with synthetic outcomes, the outcomes are all-gathered, and at
// the end every rank must hold the decisions and dropped cells of a one-process simulation of the
// same world size. Exit 0 when all ranks agree, 1 otherwise (rank 0 prints the verdict).
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "statistics/rng.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/run/sequential_schedule.h"
#include "tests/run/sequential_study_text.h"

namespace {

using namespace kvaudit;

std::string study_text() {
  run::testing::SequentialStudy study;
  study.seed = 99;
  study.instances = 300;
  study.calibration = 150;
  study.test = 150;
  return run::testing::sequential_study_text(study);
}

// Full KV scores 1; candidates violate (score 0) with probability 0, 0.01, 0.3 by budget.
run::CellOutcome synthetic(const manifest::Expansion& e, std::size_t cell) {
  const auto& c = e.cells[cell];
  run::CellOutcome o{cell, records::CellStatus::ok, 1.0};
  if (c.method < 0) return o;
  const double rate = c.budget == 0.25 ? 0.0 : c.budget == 0.5 ? 0.01 : 0.3;
  const auto w = stats::philox_words(3, c.unit, 0, 0, stats::RandomPurpose::simulation)[0];
  o.score = stats::unit_double(w ^ static_cast<std::uint64_t>(c.budget * 1000)) < rate ? 0.0 : 1.0;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int mismatch = 0;
  try {
    const auto m = manifest::parse_manifest(study_text(), "seq.toml");
    const auto e = manifest::expand(m);
    std::vector<run::PendingUnit> pending(e.units.size());
    for (std::size_t u = 0; u < e.units.size(); ++u) pending[u].unit = u;
    for (std::size_t c = 0; c < e.cells.size(); ++c) pending[e.cells[c].unit].cells.push_back(c);
    const auto plans = run::plan_sequential_calibration(m, e);

    run::SequentialScheduler scheduler(plans, e, pending);
    const run::RunWaveUnit run_unit = [&](std::size_t, std::span<const std::size_t> cells) {
      std::vector<records::CellRecord> out;
      for (std::size_t c : cells) {
        const auto o = synthetic(e, c);
        records::CellRecord r;
        r.cell_id = e.cells[c].id;
        r.status = o.status;
        r.score = o.score;
        out.push_back(r);
      }
      return out;
    };
    const auto result = run::run_sequential_waves(scheduler, pending, rank, size, run_unit,
                                                  run::mpi_wave_exchange(), [] { return false; });

    // The one-process simulation of the same world.
    run::SequentialScheduler serial(plans, e, pending);
    std::map<std::size_t, const run::PendingUnit*> by_unit;
    for (const auto& u : pending) by_unit[u.unit] = &u;
    while (true) {
      const auto wave = serial.next_wave(static_cast<std::size_t>(size));
      if (wave.empty()) break;
      std::vector<run::CellOutcome> outcomes;
      for (std::size_t unit : wave) {
        for (std::size_t c : serial.cells_to_run(by_unit.at(unit)->cells)) {
          outcomes.push_back(synthetic(e, c));
        }
      }
      serial.observe(outcomes);
    }
    if (!scheduler.finished() || scheduler.decisions_json(0) != serial.decisions_json(0) ||
        scheduler.dropped_cells() != serial.dropped_cells()) {
      mismatch = 1;
    }
    if (rank == 0) {
      std::printf("ranks %d: %zu waves, rank 0 ran %zu units; dropped cells %zu\n%s", size,
                  result.waves, result.units_run, scheduler.dropped_cells().size(),
                  scheduler.decisions_json(0).c_str());
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "rank %d: %s\n", rank, ex.what());
    mismatch = 1;
  }
  int any = 0;
  MPI_Allreduce(&mismatch, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s\n", any == 0 ? "all ranks agree" : "MISMATCH");
  MPI_Finalize();
  return any == 0 ? 0 : 1;
}
