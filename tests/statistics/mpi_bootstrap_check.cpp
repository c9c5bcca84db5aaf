// Run under mpirun with any number of ranks: computes a batch of paired bootstraps with
// mpi_paired_bootstrap_batch, and the same data grouped in clusters of 3 instances with
// mpi_cluster_paired_bootstrap_batch, and, on rank 0, compares every result (replicate hash,
// interval, count, p-value) with the single-process paired_bootstrap_batch and
// cluster_paired_bootstrap_batch; writes the combined replicate hash to the file named by argv[1]
// so that runs with different rank counts can be compared.
// Exit status 0 when identical, 1 on a mismatch or error.
#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "statistics/cluster_bootstrap.h"
#include "statistics/mpi_bootstrap.h"
#include "statistics/paired_bootstrap.h"
#include "tests/statistics/simulation_stream.h"

namespace {

using namespace kvaudit::stats;

std::vector<PairedComparison> comparisons() {
  std::vector<PairedComparison> batch;
  for (std::uint32_t c = 0; c < 5; ++c) {
    testing::SimulationStream stream(123, c);
    PairedComparison comparison;
    comparison.name = "comparison " + std::to_string(c);
    for (std::uint32_t task = 0; task < 4; ++task) {
      PairedStratum stratum;
      stratum.id = task;
      for (std::uint32_t i = 0; i < 60 + 7 * task; ++i) {
        if (c % 2 == 0) {  // 0/1 outcomes: the exact integer path
          stratum.arm_a.push_back(stream.bernoulli(0.55) ? 1 : 0);
          stratum.arm_b.push_back(stream.bernoulli(0.5) ? 1 : 0);
        } else {  // scores: the double path
          stratum.arm_a.push_back(stream.uniform());
          stratum.arm_b.push_back(stream.uniform());
        }
      }
      comparison.strata.push_back(std::move(stratum));
    }
    batch.push_back(std::move(comparison));
  }
  return batch;
}

// The same data with instance i of every stratum in cluster ⌊i/3⌋ (contexts of 3 questions).
std::vector<ClusteredPairedComparison> clustered(const std::vector<PairedComparison>& batch) {
  std::vector<ClusteredPairedComparison> out;
  for (const PairedComparison& comparison : batch) {
    ClusteredPairedComparison c;
    c.name = comparison.name + " (clusters of 3)";
    for (const PairedStratum& stratum : comparison.strata) {
      ClusteredPairedStratum s{stratum.id, stratum.arm_a, stratum.arm_b, {}};
      for (std::uint32_t i = 0; i < stratum.arm_a.size(); ++i) s.cluster.push_back(i / 3);
      c.strata.push_back(std::move(s));
    }
    out.push_back(std::move(c));
  }
  return out;
}

int run(int argc, char** argv) {
  int rank = 0;
  int ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  BootstrapOptions options;
  options.resamples = 20011;  // not a multiple of 2, 3 or 7: uneven rank ranges
  options.seed = 4242;
  options.threads = 1;
  options.comparisons_per_pass = 2;                 // several passes
  if (rank == 0 && argc > 1) std::remove(argv[1]);  // no stale hash survives a failed run
  const auto batch = comparisons();
  const auto clusters = clustered(batch);
  const auto distributed = mpi_paired_bootstrap_batch(MPI_COMM_WORLD, batch, options);
  const auto distributed_clusters =
      mpi_cluster_paired_bootstrap_batch(MPI_COMM_WORLD, clusters, options);
  if (rank != 0) {
    return distributed.empty() && distributed_clusters.empty() ? 0 : 1;
  }
  options.threads = 2;
  const auto serial = paired_bootstrap_batch(batch, options);
  const auto serial_clusters = cluster_paired_bootstrap_batch(clusters, options);
  std::uint64_t combined = 0;
  bool same = true;
  const auto compare = [&](const std::vector<BootstrapResult>& distributed_results,
                           const std::vector<BootstrapResult>& serial_results) {
    if (distributed_results.size() != serial_results.size()) {
      std::fprintf(stderr, "rank 0 got %zu results, expected %zu\n", distributed_results.size(),
                   serial_results.size());
      same = false;
      return;
    }
    for (std::size_t c = 0; c < serial_results.size(); ++c) {
      const auto& d = distributed_results[c];
      const auto& s = serial_results[c];
      const bool match = d.replicate_hash == s.replicate_hash && d.lower == s.lower &&
                         d.upper == s.upper && d.at_or_below_zero == s.at_or_below_zero &&
                         d.p_value == s.p_value && d.estimate == s.estimate && d.name == s.name;
      std::printf("ranks %d  %s  hash %016llx  [%.6f, %.6f]  p %.6f  %s\n", ranks, d.name.c_str(),
                  static_cast<unsigned long long>(d.replicate_hash), d.lower, d.upper, d.p_value,
                  match ? "identical to serial" : "DIFFERS from serial");
      same = same && match;
      combined = combined * 1099511628211ull ^ d.replicate_hash;
    }
  };
  compare(distributed, serial);
  compare(distributed_clusters, serial_clusters);
  if (argc > 1 && same) {
    std::ofstream(argv[1]) << std::hex << combined << "\n";
  }
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 1;
  try {
    status = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_bootstrap_check: %s\n", e.what());
    status = 1;
  }
  int worst = 0;
  MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
