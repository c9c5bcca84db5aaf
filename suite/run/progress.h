// Per-rank progress of `kvaudit run` on stderr: units done/total, cells done/total, cells/s and an
// ETA, one line per finished unit, e.g.
//   kvaudit run [rank 1/3] units 4/10, cells 24/60, 1.52 cells/s, elapsed 0:00:15, ETA 0:00:22
// The ETA extrapolates by estimated cost, not by unit count, because units are run longest first:
//   ETA = elapsed × (cost remaining / cost done).
// Times are passed in (seconds since the rank started), so the meter is a pure function of its
// inputs and testable without a clock.
#pragma once

#include <cstddef>
#include <string>

namespace kvaudit::run {

class ProgressMeter {
 public:
  ProgressMeter(int rank, int world_size, std::size_t total_units, std::size_t total_cells,
                double total_cost);

  // A unit of `cells` cells and estimated cost `cost` finished at `elapsed_seconds`.
  void unit_done(std::size_t cells, double cost, double elapsed_seconds);

  std::size_t units_done() const { return units_done_; }
  std::size_t cells_done() const { return cells_done_; }
  double cells_per_second() const;  // 0 before the first unit or at elapsed 0
  // Estimated seconds until the rank's last unit ends; negative when unknown (nothing done yet).
  double eta_seconds() const;
  std::string line() const;

 private:
  int rank_;
  int world_size_;
  std::size_t total_units_;
  std::size_t total_cells_;
  double total_cost_;
  std::size_t units_done_ = 0;
  std::size_t cells_done_ = 0;
  double cost_done_ = 0;
  double elapsed_ = 0;
};

// h:mm:ss (rounded down to whole seconds; negative or non-finite → "?").
std::string format_duration(double seconds);

}  // namespace kvaudit::run
