// Stratified paired cluster bootstrap of mean differences: the intervals of the reuse protocol,
// where several questions share one compressed context (docs/design/reuse.md §Reduce: which
// intervals resample contexts).
//
// Data: as in paired_bootstrap.h (two arms A and B on the same instances, strata t), plus a cluster
// id per instance (the context). The instances of stratum t fall into K_t clusters, numbered
// k = 0…K_t−1 in order of first appearance; cluster k holds n_tk instances with difference sum
// S_tk = Σ_{i ∈ k} d_i (d_i = u_i^A − u_i^B, summed in instance order).
//   Estimate: unchanged by the clusters: pooled Δ̂ = Σd / N, macro Δ̂ = (1/T) Σ_t mean(d_t).
//   Replicate b: within each stratum t draw K_t cluster indices with replacement,
//             c_0…c_{K−1} = draw_resample_indices(seed, stratum id, b, bootstrap_index, K_t) — the
//             per-instance stream of rng.h with n replaced by K — and take every instance of each
//             drawn cluster, in both arms (pairing and clustering are both kept):
//               pooled Δ*_b = Σ_t Σ_j S_{t,c_j} / Σ_t Σ_j n_{t,c_j}
//               macro  Δ*_b = (1/T) Σ_t (Σ_j S_{t,c_j} / Σ_j n_{t,c_j})
//             (a ratio estimator: the resample's instance count varies when cluster sizes differ;
//             Davison & Hinkley 1997, §3.8 "Hierarchical data"; Field & Welsh 2007, JRSS-B 69(3)).
//   Interval, p-value, BCa: exactly as paired_bootstrap.h (finish_bootstrap_result); the BCa
//             acceleration comes from the leave-one-cluster-out jackknife, (ΣS − S_k)/(N − n_k)
//             (macro: stratum t's mean replaced by (S_t − S_tk)/(n_t − n_tk)).
// Why: questions on one context share the context's compression, so their outcomes are
// correlated; the per-instance bootstrap then treats m correlated questions as m independent ones
// and its interval is too narrow by about √(1 + (m − 1)ρ) (ρ: intra-context correlation of d).
//
// Degenerate case: when every cluster has one instance, cluster k is instance k, the draws are
// those of paired_bootstrap for the same seed and stratum id, S_k = d_k and every sum runs in the
// same order (int64 for integer data, double otherwise), so the result equals paired_bootstrap's
// bit for bit (tests/statistics/cluster_bootstrap_test.cpp).
// Determinism: every index is a pure function of (seed, stratum id, b, draw j); each replicate is
// computed by one thread in a fixed order (strata by ascending id, draws j = 0, 1, …), integer data
// (every d an integer in [−127, 127]) are summed in int64. The replicates are bit-identical for
// any thread count and MPI rank count (mpi_bootstrap.h: mpi_cluster_paired_bootstrap_batch).
// Common random numbers: a batch draws the cluster indices once per (replicate, stratum id) for
// every comparison on that stratum, which must then have the same clusters (same sizes in order of
// first appearance) in every comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "statistics/paired_bootstrap.h"

namespace kvaudit::stats {

// One stratum of one comparison: instance i of arm_a is paired with instance i of arm_b and
// belongs to cluster cluster[i]. The instances of a cluster need not be adjacent.
struct ClusteredPairedStratum {
  std::uint32_t id = 0;  // stable stratum (task) id: the Philox counter word
  std::vector<double> arm_a;
  std::vector<double> arm_b;
  std::vector<std::uint32_t> cluster;  // cluster (context) id of each instance
};

struct ClusteredPairedComparison {
  std::string name;                            // what tables print; copied to the result
  std::vector<ClusteredPairedStratum> strata;  // ≥ 1, ids distinct, each with ≥ 1 instance
};

// One comparison. Throws kvaudit::InputError (naming the comparison and stratum) for: no strata,
// duplicate stratum ids, an empty stratum, arms or cluster ids of different length, non-finite
// utilities, bad options (as paired_bootstrap). BootstrapResult::clusters is Σ K_t.
BootstrapResult cluster_paired_bootstrap(const ClusteredPairedComparison& comparison,
                                         const BootstrapOptions& options);

// Many comparisons: per replicate and stratum id the cluster indices are drawn once and applied to
// every comparison containing that stratum; the results equal cluster_paired_bootstrap on each
// comparison alone (bit for bit). A stratum id must have the same cluster sizes (in order of first
// appearance) in every comparison, else InputError. Results are in input order.
std::vector<BootstrapResult> cluster_paired_bootstrap_batch(
    const std::vector<ClusteredPairedComparison>& comparisons, const BootstrapOptions& options);

// The validated batch and its replicate kernel, shared by the thread driver above and the MPI
// driver (mpi_bootstrap.h); same interface as BootstrapPlan (bootstrap_plan.h).
class ClusterBootstrapPlan {
 public:
  // Uses comparisons[first, first + count). Throws kvaudit::InputError for invalid comparisons.
  ClusterBootstrapPlan(const std::vector<ClusteredPairedComparison>& comparisons, std::size_t first,
                       std::size_t count, Aggregate aggregate);

  std::size_t size() const { return comparisons_.size(); }

  // out[c][b − begin] = Δ*_b of comparison c for b in [begin, end); 0 ≤ begin ≤ end < 2³²,
  // threads ≥ 1 (each replicate on one thread).
  void replicates(std::uint64_t seed, std::int64_t begin, std::int64_t end, int threads,
                  std::vector<std::vector<double>>& out) const;

  // The result of comparison c from its complete replicate vector (b order).
  BootstrapResult summarize(std::size_t c, std::vector<double> replicates,
                            std::int64_t at_or_below_zero, const BootstrapOptions& options) const;

 private:
  struct Stratum {
    std::uint32_t id = 0;
    std::vector<std::uint32_t> cluster_sizes;  // n_k, k in order of first appearance
    std::uint32_t instances = 0;               // Σ n_k
  };
  struct Part {               // one stratum of one comparison
    std::size_t stratum = 0;  // index into strata_
    std::size_t offset = 0;   // first cluster sum of this part in the comparison's sums
    double sum = 0;           // Σ d over the stratum (exact for integer data)
  };
  struct Comparison {
    std::string name;
    bool integer = false;
    std::vector<std::int64_t> integer_sums;  // S_k per part and cluster, when integer
    std::vector<double> double_sums;         // otherwise
    std::vector<Part> parts;                 // ascending stratum id
    std::int64_t instances = 0;
    std::int64_t clusters = 0;
    double mean_a = 0;
    double mean_b = 0;
    double estimate = 0;
    bool one_distinct_difference = true;
  };
  // Per stratum, the cluster sums of every comparison on it transposed into rows: row k holds
  // S_k of each integer (resp. double) comparison, so a replicate adds rows c_0, c_1, … and each
  // lane keeps the order of its own sum.
  struct StratumRows {
    std::vector<std::uint32_t> integer_comparisons;
    std::vector<std::int64_t> integer_rows;  // K × integer_comparisons.size()
    std::vector<std::uint32_t> double_comparisons;
    std::vector<double> double_rows;  // K × double_comparisons.size()
  };
  Aggregate aggregate_;
  std::vector<Stratum> strata_;  // distinct ids, ascending
  std::vector<Comparison> comparisons_;
  std::vector<StratumRows> rows_;  // per stratum
  std::uint32_t max_clusters_ = 0;

  void replicate_range(std::uint64_t seed, std::uint32_t begin, std::uint32_t end,
                       std::uint32_t out_offset, std::vector<std::vector<double>>& out) const;
  std::vector<double> jackknife(std::size_t c) const;
};

// Validates comparisons[first, first + count); throws kvaudit::InputError naming the comparison
// and the stratum.
void validate_clustered_comparisons(const std::vector<ClusteredPairedComparison>& comparisons,
                                    std::size_t first, std::size_t count);

}  // namespace kvaudit::stats
