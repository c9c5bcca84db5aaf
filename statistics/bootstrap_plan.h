// The validated, preprocessed form of a batch of paired comparisons and the replicate kernel
// shared by paired_bootstrap.cpp (threads) and mpi_bootstrap.cpp (ranks). Not needed by callers
// of paired_bootstrap.h; it is public so that other parallel drivers can split replicate ranges.
//
// Construction validates the comparisons, computes the differences d = a − b (int8 when every d of
// a comparison is an integer in [−127, 127], else double) and groups the strata by id so that each
// (replicate, stratum id) draws its indices once. replicates() computes Δ*_b for b in [begin, end)
// with the b range split over threads (each replicate on one thread, fixed summation order).
//
// How a replicate is evaluated (the values are those of the plain definition, bit for bit):
// * a part (one stratum of one comparison) whose differences are all 0 adds exactly 0 and is
//   skipped; a stratum with no other part draws no indices at all (the draws of a stratum are a
//   pure function of (seed, stratum id, b), so skipping them changes no other draw);
// * the other parts of a stratum are laid out as lanes of a row per instance j (d_j of each part),
//   and a replicate adds the rows idx_0, idx_1, … with SIMD vectors (AVX2 where the CPU has it,
//   chosen at run time; SSE2 otherwise): every lane is its own sum, in the order i = 0, 1, … of
//   the plain definition. Integer lanes are 8, 16, 32 or 64 bits wide, the narrowest in which
//   max|d|·n cannot overflow (integer sums are exact); double lanes add in the same order as the
//   scalar loop (floating-point addition is not associative, so the order is kept).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "statistics/paired_bootstrap.h"
#include "statistics/parallel_for.h"

namespace kvaudit::stats {

class BootstrapPlan {
 public:
  // Uses comparisons[first, first + count). Throws kvaudit::InputError for invalid comparisons.
  BootstrapPlan(const std::vector<PairedComparison>& comparisons, std::size_t first,
                std::size_t count, Aggregate aggregate);

  std::size_t size() const { return comparisons_.size(); }

  // out is resized to size() vectors of (end − begin) values: out[c][b − begin] = Δ*_b of
  // comparison c. Requires 0 ≤ begin ≤ end < 2³²; threads ≥ 1.
  void replicates(std::uint64_t seed, std::int64_t begin, std::int64_t end, int threads,
                  std::vector<std::vector<double>>& out) const;

  // Turns the complete replicate vector (b order, B values) of comparison c into its result.
  // `at_or_below_zero` is #{b : Δ*_b ≤ 0} (passed in so MPI can reduce it as an integer).
  BootstrapResult summarize(std::size_t c, std::vector<double> replicates,
                            std::int64_t at_or_below_zero, const BootstrapOptions& options) const;

 private:
  struct Stratum {
    std::uint32_t id = 0;
    std::uint32_t size = 0;
  };
  struct Part {               // one stratum of one comparison
    std::size_t stratum = 0;  // index into strata_
    std::size_t offset = 0;   // first difference in the comparison's data
    std::uint32_t size = 0;
    double sum = 0;  // Σ d over the stratum (exact for integer data)
  };
  struct Comparison {
    std::string name;
    bool integer = false;
    std::vector<std::int8_t> small;  // differences when integer
    std::vector<double> wide;        // differences otherwise
    std::vector<Part> parts;         // in input order
    std::int64_t instances = 0;
    double mean_a = 0;
    double mean_b = 0;
    double estimate = 0;
  };
  // The nonzero parts that use one stratum, transposed into lanes: row j holds d_j of every such
  // part, so a replicate adds rows idx_0, idx_1, … and each lane keeps the order of its own sum.
  // Rows are padded to whole 32-byte vectors, unless the padding of a large stratum would exceed
  // 1 MiB ("narrow": unpadded int8 or double rows summed by a scalar loop in int64 or double).
  struct StratumLanes {
    std::uint32_t integer_bytes = 0;                 // integer lane width: 1, 2, 4 or 8; 0: none
    bool integer_narrow = false;                     // unpadded int8 rows, int64 sums
    std::size_t integer_stride = 0;                  // bytes per row (padded: a multiple of 32)
    std::vector<std::uint8_t> integer_rows;          // size × integer_stride
    std::vector<std::uint32_t> integer_comparisons;  // the comparison of each integer lane
    bool wide_narrow = false;                        // unpadded rows
    std::size_t wide_stride = 0;                     // doubles per row (padded: a multiple of 4)
    std::vector<double> wide_rows;                   // size × wide_stride
    std::vector<std::uint32_t> wide_comparisons;     // the comparison of each double lane
  };
  Aggregate aggregate_;
  std::vector<Stratum> strata_;  // distinct ids, sorted by id
  std::vector<Comparison> comparisons_;
  std::vector<StratumLanes> lanes_;  // per stratum
  std::uint32_t max_stratum_size_ = 0;

  void plan_lanes(const std::vector<std::vector<std::pair<std::size_t, std::size_t>>>& users);
  void replicate_range(std::uint64_t seed, std::uint32_t begin, std::uint32_t end,
                       std::uint32_t out_offset, std::vector<std::vector<double>>& out) const;
  std::vector<double> jackknife(std::size_t c) const;
};

// Validates comparisons[first, first + count) (see paired_bootstrap.h for the rules, including
// "a stratum id has the same size in every comparison"); throws kvaudit::InputError naming the
// comparison and the stratum.
void validate_paired_comparisons(const std::vector<PairedComparison>& comparisons,
                                 std::size_t first, std::size_t count);

// Validates BootstrapOptions; throws kvaudit::InputError naming the field.
void validate_bootstrap_options(const BootstrapOptions& options);

// options.threads, or std::thread::hardware_concurrency() (at least 1) when it is 0.
int resolve_threads(const BootstrapOptions& options);

// The replicate-dependent fields of a result, shared by every bootstrap driver (this plan and
// ClusterBootstrapPlan, cluster_bootstrap.h): confidence, resamples, seed, replicate hash,
// #{Δ* ≤ 0} and p-value, the percentile interval and, with options.bca, the BCa interval (or the
// reason it is undefined). `result` must already hold the estimate. `bca_precheck` is the reason
// BCa is undefined that the data alone show ("" when none); `jackknife` returns the
// leave-one-out estimates and is called only when BCa is computed.
void finish_bootstrap_result(BootstrapResult& result, std::vector<double> replicates,
                             std::int64_t at_or_below_zero, const BootstrapOptions& options,
                             const std::string& bca_precheck,
                             const std::function<std::vector<double>()>& jackknife);

// The count #{Δ* ≤ 0} of a replicate vector.
std::int64_t count_at_or_below_zero(const std::vector<double>& replicates);

// Checks a replicate range [begin, end) (0 ≤ begin ≤ end ≤ 2³²−1) and threads ≥ 1 for
// `plan` (named in the InternalError), sizes out to `comparisons` vectors of end − begin values and
// runs range(b0 + lo, b0 + hi, b0) over contiguous ranges, one per thread (each replicate
// computed entirely by one thread). Shared by BootstrapPlan and ClusterBootstrapPlan.
void run_replicate_ranges(
    const char* plan, std::int64_t begin, std::int64_t end, int threads, std::size_t comparisons,
    std::vector<std::vector<double>>& out,
    const std::function<void(std::uint32_t, std::uint32_t, std::uint32_t)>& range);

// The batch driver of every bootstrap over a Plan (BootstrapPlan, ClusterBootstrapPlan): plans of
// options.comparisons_per_pass comparisons, their replicates on `threads` threads, then the
// summaries spread over the threads (hash, sort, quantiles are independent per comparison).
// The comparisons and options must already be validated.
template <typename Plan, typename Comparison>
std::vector<BootstrapResult> bootstrap_batch(const std::vector<Comparison>& comparisons,
                                             const BootstrapOptions& options, int threads) {
  std::vector<BootstrapResult> results;
  results.reserve(comparisons.size());
  std::vector<std::vector<double>> replicates;
  for (std::size_t first = 0; first < comparisons.size(); first += options.comparisons_per_pass) {
    const std::size_t count = std::min(options.comparisons_per_pass, comparisons.size() - first);
    const Plan plan(comparisons, first, count, options.aggregate);
    plan.replicates(options.seed, 0, options.resamples, threads, replicates);
    std::vector<BootstrapResult> pass(count);
    for_each_parallel(count, threads, [&](std::size_t c) {
      const std::int64_t at_or_below_zero = count_at_or_below_zero(replicates[c]);
      pass[c] = plan.summarize(c, std::move(replicates[c]), at_or_below_zero, options);
    });
    for (BootstrapResult& result : pass) results.push_back(std::move(result));
  }
  return results;
}

}  // namespace kvaudit::stats
