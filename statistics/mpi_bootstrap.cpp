// The paired bootstrap (per instance or per cluster) over MPI ranks: contiguous b ranges per rank,
// integer MPI_Reduce of the #{Δ* ≤ 0} counts, MPI_Gatherv of the replicates to rank 0 in b order
// (see mpi_bootstrap.h).
#include "statistics/mpi_bootstrap.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "base/errors.h"
#include "statistics/bootstrap_plan.h"
#include "statistics/cluster_bootstrap.h"

namespace kvaudit::stats {
namespace {

void check(int code, const char* call) {
  if (code != MPI_SUCCESS) {
    char message[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, message, &length);
    throw InternalError(std::string("mpi_paired_bootstrap_batch: ") + call +
                        " failed: " + std::string(message, static_cast<std::size_t>(length)));
  }
}

std::int64_t range_start(std::int64_t total, int rank, int ranks) { return total * rank / ranks; }

// The driver for either plan (BootstrapPlan over PairedComparison, ClusterBootstrapPlan over
// ClusteredPairedComparison): both split replicate ranges and summarize the same way.
template <typename Plan, typename Input>
std::vector<BootstrapResult> mpi_bootstrap_batch(MPI_Comm comm,
                                                 const std::vector<Input>& comparisons,
                                                 const BootstrapOptions& options) {
  if (options.resamples > std::numeric_limits<int>::max()) {
    throw InputError("mpi paired bootstrap: resamples must be <= " +
                     std::to_string(std::numeric_limits<int>::max()) +
                     " (MPI counts are int), got " + std::to_string(options.resamples));
  }
  int rank = 0;
  int ranks = 1;
  check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check(MPI_Comm_size(comm, &ranks), "MPI_Comm_size");
  const int threads = resolve_threads(options);
  const std::int64_t resamples = options.resamples;
  const std::int64_t begin = range_start(resamples, rank, ranks);
  const std::int64_t end = range_start(resamples, rank + 1, ranks);

  std::vector<BootstrapResult> results;
  std::vector<std::vector<double>> local;
  for (std::size_t first = 0; first < comparisons.size(); first += options.comparisons_per_pass) {
    const std::size_t count = std::min(options.comparisons_per_pass, comparisons.size() - first);
    const Plan plan(comparisons, first, count, options.aggregate);
    plan.replicates(options.seed, begin, end, threads, local);

    // Integer counts: exact whatever the reduction order.
    std::vector<std::int64_t> local_counts(count);
    for (std::size_t c = 0; c < count; ++c) local_counts[c] = count_at_or_below_zero(local[c]);
    std::vector<std::int64_t> counts(count);
    check(MPI_Reduce(local_counts.data(), counts.data(), static_cast<int>(count), MPI_INT64_T,
                     MPI_SUM, 0, comm),
          "MPI_Reduce");

    // One Gatherv per comparison: rank r's block lands at offset begin_r, so rank 0 holds
    // Δ*_0 … Δ*_{B−1} in b order.
    std::vector<int> receive_counts;
    std::vector<int> displacements;
    if (rank == 0) {
      for (int r = 0; r < ranks; ++r) {
        const std::int64_t lo = range_start(resamples, r, ranks);
        const std::int64_t hi = range_start(resamples, r + 1, ranks);
        receive_counts.push_back(static_cast<int>(hi - lo));
        displacements.push_back(static_cast<int>(lo));
      }
    }
    for (std::size_t c = 0; c < count; ++c) {
      std::vector<double> all(rank == 0 ? static_cast<std::size_t>(resamples) : 0);
      check(MPI_Gatherv(local[c].data(), static_cast<int>(local[c].size()), MPI_DOUBLE, all.data(),
                        receive_counts.data(), displacements.data(), MPI_DOUBLE, 0, comm),
            "MPI_Gatherv");
      if (rank == 0) results.push_back(plan.summarize(c, std::move(all), counts[c], options));
    }
  }
  return results;
}

}  // namespace

std::vector<BootstrapResult> mpi_paired_bootstrap_batch(
    MPI_Comm comm, const std::vector<PairedComparison>& comparisons,
    const BootstrapOptions& options) {
  validate_bootstrap_options(options);
  validate_paired_comparisons(comparisons, 0, comparisons.size());
  return mpi_bootstrap_batch<BootstrapPlan>(comm, comparisons, options);
}

std::vector<BootstrapResult> mpi_cluster_paired_bootstrap_batch(
    MPI_Comm comm, const std::vector<ClusteredPairedComparison>& comparisons,
    const BootstrapOptions& options) {
  validate_bootstrap_options(options);
  validate_clustered_comparisons(comparisons, 0, comparisons.size());
  return mpi_bootstrap_batch<ClusterBootstrapPlan>(comm, comparisons, options);
}

}  // namespace kvaudit::stats
