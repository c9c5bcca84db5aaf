// The stratified paired bootstrap's public entry points: one comparison, a batch processed in
// passes, the type-7 quantile and the replicate hash. Procedure in paired_bootstrap.h; the kernel
// is BootstrapPlan (bootstrap_plan.cpp).
#include "statistics/paired_bootstrap.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "statistics/bootstrap_plan.h"
#include "base/errors.h"

namespace kvaudit::stats {

const char* aggregate_name(Aggregate aggregate) {
  return aggregate == Aggregate::pooled ? "pooled" : "macro";
}

BootstrapResult paired_bootstrap(const PairedComparison& comparison,
                                 const BootstrapOptions& options) {
  return paired_bootstrap_batch({comparison}, options).front();
}

std::vector<BootstrapResult> paired_bootstrap_batch(
    const std::vector<PairedComparison>& comparisons, const BootstrapOptions& options) {
  validate_bootstrap_options(options);
  validate_paired_comparisons(comparisons, 0, comparisons.size());
  const int threads = resolve_threads(options);
  std::vector<BootstrapResult> results;
  results.reserve(comparisons.size());
  std::vector<std::vector<double>> replicates;
  for (std::size_t first = 0; first < comparisons.size(); first += options.comparisons_per_pass) {
    const std::size_t count = std::min(options.comparisons_per_pass, comparisons.size() - first);
    const BootstrapPlan plan(comparisons, first, count, options.aggregate);
    plan.replicates(options.seed, 0, options.resamples, threads, replicates);
    for (std::size_t c = 0; c < count; ++c) {
      const std::int64_t at_or_below_zero = count_at_or_below_zero(replicates[c]);
      results.push_back(plan.summarize(c, std::move(replicates[c]), at_or_below_zero, options));
    }
  }
  return results;
}

double quantile_type7(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) throw InputError("quantile_type7: no values");
  if (!(q >= 0.0 && q <= 1.0)) {
    throw InputError("quantile_type7: q must be in [0, 1], got " + std::to_string(q));
  }
  const double h = static_cast<double>(sorted.size() - 1) * q;
  const double floor_h = std::floor(h);
  const auto k = static_cast<std::size_t>(floor_h);
  if (k + 1 >= sorted.size()) return sorted.back();
  return sorted[k] + (h - floor_h) * (sorted[k + 1] - sorted[k]);
}

std::uint64_t replicate_hash(const std::vector<double>& values) {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (double value : values) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    for (int byte = 0; byte < 8; ++byte) {  // little-endian byte order, whatever the host
      hash ^= (bits >> (8 * byte)) & 0xffu;
      hash *= 0x100000001b3ull;  // FNV prime
    }
  }
  return hash;
}

}  // namespace kvaudit::stats
