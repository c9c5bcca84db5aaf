// Stratified paired bootstrap of mean differences (docs/design/statistics.md §Paired bootstrap;
// docs/REPORT.md "Conventions shared by the analyses").
//
// A comparison has two arms A and B (e.g. query-aware vs query-agnostic, method vs baseline)
// measured on the same instances, grouped in strata (tasks). d_i = u_i^A − u_i^B.
//   Estimate: pooled (default) Δ̂ = Σ_t Σ_i d_ti / Σ_t n_t (instance-weighted), or macro
//             Δ̂ = (1/T) Σ_t mean_i(d_ti) (every stratum weighs the same).
//   Replicate b = 0…B−1: within each stratum t, draw n_t indices with replacement (rng.h; the same
//             indices for both arms, i.e. d is resampled) and aggregate the same way → Δ*_b.
//   Interval: percentile [Q(α/2), Q(1−α/2)] of the Δ*_b, Hyndman–Fan type 7 (numpy 'linear');
//             optional BCa (Efron 1987) with jackknife acceleration over instances.
//   p-value:  one-sided for H1: Δ > 0, p = (1 + #{b : Δ*_b ≤ 0}) / (B + 1) (percentile inversion;
//             ties at 0 count against the claim; never 0).
// Common random numbers: the Philox key is the seed and the counter carries the stratum id, so
// every comparison that contains stratum id s (with the same n_s) resamples the same instances of
// s. Callers must therefore give a stratum the same id in every comparison (e.g. the task's index
// in the manifest) and align instances the same way. Exactness: when every d is an integer in
// [−127, 127] (0/1 utilities) the sums are kept in int64, so replicates are exact and order-free;
// otherwise each replicate is summed in double in a fixed order of (stratum, i). Either way each
// replicate is computed entirely by one thread, so results are bit-identical for any thread count
// or MPI rank count (mpi_bootstrap.h). Replicate hash: FNV-1a 64 over the little-endian IEEE-754
// bytes of Δ*_0 … Δ*_{B−1}. Cost per batch pass: B·Σn_t index draws (two per Philox block,
// sixteen blocks per AVX2 step) over the strata in which some comparison has a nonzero difference,
// and per draw one row of SIMD adds covering every comparison of the stratum (bootstrap_plan.h);
// no allocation per replicate. Summaries (hash, sort, quantiles) run on the threads too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvaudit::stats {

enum class Aggregate {
  pooled,  // instance-weighted mean over all strata
  macro,   // unweighted mean of the per-stratum means
};

const char* aggregate_name(Aggregate aggregate);  // "pooled" | "macro"

struct BootstrapOptions {
  std::int64_t resamples = 50000;  // B, in [1, 2³²)
  std::uint64_t seed = 0;          // the study's statistics seed
  double confidence = 0.95;        // two-sided level of the percentile (and BCa) interval
  Aggregate aggregate = Aggregate::pooled;
  bool bca = false;              // also compute the BCa interval
  int threads = 0;               // 0: std::thread::hardware_concurrency()
  bool keep_replicates = false;  // return Δ*_0…Δ*_{B−1} in BootstrapResult::replicates
  // Return the replicates sorted ascending in BootstrapResult::sorted_replicates (the vector the
  // interval was read from; callers that need further quantiles then sort nothing).
  bool keep_sorted_replicates = false;
  // Batch passes hold the replicates of at most this many comparisons at once (memory:
  // 8·B bytes each); the indices are redrawn for each pass.
  std::size_t comparisons_per_pass = 256;
};

// One stratum of one comparison: instance i of arm_a is paired with instance i of arm_b.
struct PairedStratum {
  std::uint32_t id = 0;  // stable stratum (task) id: the Philox counter word, see above
  std::vector<double> arm_a;
  std::vector<double> arm_b;
};

struct PairedComparison {
  std::string name;                   // what tables print; copied to the result
  std::vector<PairedStratum> strata;  // ≥ 1, ids distinct, each with ≥ 1 instance
};

struct BcaInterval {
  double lower = 0;
  double upper = 0;
  double bias_correction = 0;  // z0 = Φ⁻¹(#{Δ*_b < Δ̂} / B)
  double acceleration = 0;     // a from the jackknife over instances
};

struct BootstrapResult {
  std::string name;
  Aggregate aggregate = Aggregate::pooled;
  std::int64_t instances = 0;  // Σ n_t
  std::int64_t strata = 0;
  std::int64_t clusters = 0;  // Σ K_t (cluster_bootstrap.h); 0: instances were resampled
  double mean_a = 0;          // arm means, aggregated like the estimate
  double mean_b = 0;
  double estimate = 0;  // Δ̂
  double confidence = 0.95;
  double lower = 0;  // percentile interval
  double upper = 0;
  std::optional<BcaInterval> bca;     // when requested and defined
  std::string bca_unavailable;        // why BCa was not computed (degenerate data), else empty
  std::int64_t at_or_below_zero = 0;  // #{b : Δ*_b ≤ 0}
  double p_value = 1;                 // (1 + at_or_below_zero) / (B + 1)
  std::int64_t resamples = 0;
  std::uint64_t seed = 0;
  bool exact_integer = false;  // integer sums were used
  std::uint64_t replicate_hash = 0;
  std::vector<double> replicates;         // b order; only with keep_replicates
  std::vector<double> sorted_replicates;  // ascending; only with keep_sorted_replicates
};

// One comparison. Throws kvaudit::InputError (naming the comparison and stratum) for: no strata,
// duplicate stratum ids, an empty stratum, arms of different length, non-finite utilities, bad
// options (resamples < 1 or ≥ 2³², confidence outside (0, 1), threads < 0).
BootstrapResult paired_bootstrap(const PairedComparison& comparison,
                                 const BootstrapOptions& options);

// Many comparisons in one pass: per replicate and stratum id the indices are drawn once and applied
// to every comparison containing that stratum. The results equal those of paired_bootstrap on each
// comparison alone (bit for bit). A stratum id must have the same size in every comparison (else
// InputError). Results are in input order.
std::vector<BootstrapResult> paired_bootstrap_batch(
    const std::vector<PairedComparison>& comparisons, const BootstrapOptions& options);

// Hyndman–Fan type 7 quantile of sorted values (numpy's default 'linear'): h = (N−1)·q,
// Q = x[⌊h⌋] + (h − ⌊h⌋)(x[⌊h⌋+1] − x[⌊h⌋]). Requires N ≥ 1 and q in [0, 1].
double quantile_type7(const std::vector<double>& sorted, double q);

// Sorts ascending; the result is exactly std::sort's. Replicates take few distinct values when the
// data are 0/1 (at most 2n + 1): those are counted in a hash table and only the distinct values
// sorted; otherwise an LSD radix sort on the order-preserving 64-bit keys of the doubles. Vectors
// holding a NaN or a −0 (where equal-comparing values differ in bits) go to std::sort.
void sort_replicates(std::vector<double>& values);

// FNV-1a 64 over the little-endian bytes of the values (the replicate hash).
std::uint64_t replicate_hash(const std::vector<double>& values);

}  // namespace kvaudit::stats
