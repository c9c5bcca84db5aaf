// Per-rank progress lines (see progress.h).
#include "suite/run/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kvaudit::run {

ProgressMeter::ProgressMeter(int rank, int world_size, std::size_t total_units,
                             std::size_t total_cells, double total_cost)
    : rank_(rank),
      world_size_(world_size),
      total_units_(total_units),
      total_cells_(total_cells),
      total_cost_(total_cost) {}

void ProgressMeter::unit_done(std::size_t cells, double cost, double elapsed_seconds) {
  ++units_done_;
  cells_done_ += cells;
  cost_done_ += cost;
  elapsed_ = elapsed_seconds;
}

double ProgressMeter::cells_per_second() const {
  return elapsed_ > 0 ? static_cast<double>(cells_done_) / elapsed_ : 0.0;
}

double ProgressMeter::eta_seconds() const {
  if (units_done_ == 0) return -1;
  if (units_done_ >= total_units_) return 0;
  if (cost_done_ > 0) return elapsed_ * std::max(0.0, total_cost_ - cost_done_) / cost_done_;
  // Zero-cost estimates: fall back to the unit count.
  return elapsed_ * static_cast<double>(total_units_ - units_done_) /
         static_cast<double>(units_done_);
}

std::string ProgressMeter::line() const {
  std::ostringstream s;
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.2f", cells_per_second());
  s << "kvaudit run [rank " << rank_ << "/" << world_size_ << "] units " << units_done_ << "/"
    << total_units_ << ", cells " << cells_done_ << "/" << total_cells_ << ", " << rate
    << " cells/s, elapsed " << format_duration(elapsed_) << ", ETA "
    << format_duration(eta_seconds());
  return s.str();
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<long long>(seconds);
  char text[48];
  std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", total / 3600, (total / 60) % 60,
                total % 60);
  return text;
}

}  // namespace kvaudit::run
