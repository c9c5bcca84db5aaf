// The paired bootstrap with its replicates split over MPI ranks (library kvaudit_statistics_mpi).
//
// Rank r of P computes the replicates b ∈ [⌊B·r/P⌋, ⌊B·(r+1)/P⌋) of every comparison (threads
// split that range further); the per-rank counts #{Δ*_b ≤ 0} are summed with an integer
// MPI_Reduce (exact) and the replicate vectors are gathered to rank 0 in b order with MPI_Gatherv.
// Because every index is a pure function of (seed, stratum, b, i) (rng.h), rank 0's results are
// bit-identical to paired_bootstrap_batch for any number of ranks.
#pragma once

#include <mpi.h>

#include <vector>

#include "statistics/cluster_bootstrap.h"
#include "statistics/paired_bootstrap.h"

namespace kvaudit::stats {

// Collective over `comm`: every rank passes the same comparisons and options. Returns the results
// on rank 0 (in input order) and an empty vector on the other ranks. Throws kvaudit::InputError for
// invalid input (on every rank alike) and kvaudit::InternalError when an MPI call fails.
std::vector<BootstrapResult> mpi_paired_bootstrap_batch(
    MPI_Comm comm, const std::vector<PairedComparison>& comparisons,
    const BootstrapOptions& options);

// The cluster bootstrap (cluster_bootstrap.h) split the same way; rank 0's results are
// bit-identical to cluster_paired_bootstrap_batch for any number of ranks.
std::vector<BootstrapResult> mpi_cluster_paired_bootstrap_batch(
    MPI_Comm comm, const std::vector<ClusteredPairedComparison>& comparisons,
    const BootstrapOptions& options);

}  // namespace kvaudit::stats
