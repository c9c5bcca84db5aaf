// Fixed budgets of the list wrappers (wrapper_budgets.h).
#include "methods/wrapper_budgets.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace kvaudit::methods {

double mean_compression(const std::vector<double>& ratios) {
  double sum = 0.0;
  for (const double r : ratios) sum += r;
  return ratios.empty() ? 0.0 : sum / static_cast<double>(ratios.size());
}

double composed_compression(const std::vector<double>& ratios) {
  double retained = 1.0;
  for (const double r : ratios) retained *= 1.0 - r;
  return 1.0 - retained;
}

void check_fixed_compression(const std::string& method, double fixed, double cell) {
  if (std::abs(fixed - cell) <= kFixedCompressionTolerance) return;
  std::ostringstream message;
  message.precision(17);
  message << method << ": its compression_ratios fix the compression ratio at " << fixed
          << " (as kvpress reports it); a cell asked for " << cell;
  throw std::invalid_argument(message.str());
}

}  // namespace kvaudit::methods
