// Paired comparisons of two arms over benchmark instances, the engine behind the protocol-gap,
// baseline-win and backend-confound tables.
//
// A row holds, for every instance (the resampling unit, study_frame.h) of its comparison, the
// utility of arm A and of arm B (each an average over the cells the row pools for that instance).
// d_i = a_i − b_i; the estimate is the instance-weighted mean Δ̂ = Σ d_i / n.
// Interval: the stratified paired bootstrap of statistics/paired_bootstrap.h (strata = tasks,
// Philox keyed by (seed, stratum, replicate), B replicates, percentile, Hyndman–Fan type 7), at
// the marginal level 1 − α and at the family level 1 − α/m (Bonferroni over the row's family).
// Tests (one-sided, H1: Δ > 0): the bootstrap p = (1 + #{Δ* ≤ 0}) / (B + 1); for small samples of
// 0/1 utilities (n < 50 instances, one pair each) the exact McNemar test instead
// (statistics/mcnemar.h), as docs/design/statistics.md §Small samples recommends. A row is
// significant when its test's p ≤ α/m. The other side (H1: Δ < 0) is tested the same way, with
// (1 + #{Δ* ≥ 0}) / (B + 1) or McNemar's lower tail. Two-sided bootstrap p:
// min(1, 2·min(1 + #{Δ* ≤ 0}, 1 + #{Δ* ≥ 0}) / (B + 1)).
// Common random numbers: a task stratum that holds every instance of its task has the task's id,
// so all comparisons on that task resample the same instances; a stratum with instances missing
// gets its own id (one per distinct instance set).
// Reuse (docs/design/reuse.md §Reduce): a row with a reuse cell on either arm (`clustered`) pairs
// by (task, context, question) and runs through the stratified paired cluster bootstrap
// (statistics/cluster_bootstrap.h; cluster = the context, stratum = the task as above), with the
// same B, seed, Philox keying, percentile intervals and p-values; never McNemar (its pairs would
// not be independent). Its task stratum keeps the task's id when it holds every context of the
// task with the cluster sizes of the first such stratum seen (common random numbers need equal
// cluster sizes), else a subset id per distinct (context, question) set. With one question per
// context the result equals the per-question bootstrap bit for bit. `estimate`, `instances` and
// the means count (context, question) pairs; `clusters` counts contexts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "suite/reduce/families.h"

namespace kvaudit::reduce {

struct BootstrapSettings {
  std::int64_t resamples = 50000;
  std::uint64_t seed = 0;
  int threads = 0;                   // 0: all hardware threads
  double alpha = 0.05;               // marginal interval level 1 − alpha
  std::size_t rows_per_batch = 128;  // rows whose replicates are held at once (8·B bytes each)
};

struct PairedInstance {
  std::uint32_t task = 0;      // global task id (the stratum)
  std::int64_t instance = 0;   // the benchmark instance; under reuse the context
  std::uint32_t question = 0;  // the question of the context (reuse), else 0
  double a = 0;
  double b = 0;
  int pairs = 1;  // cell pairs averaged into a and b
};

struct PairedRow {
  std::string name;
  std::vector<PairedInstance> instances;  // any order; (task, instance, question) unique
  const ResolvedFamily* family = nullptr;
  bool clustered = false;  // resample contexts (a reuse arm): the cluster bootstrap
};

struct PairedRowResult {
  bool empty = true;  // no instance: nothing was computed
  std::int64_t instances = 0;
  std::int64_t strata = 0;
  std::int64_t clusters = 0;  // contexts resampled (clustered rows), else = instances
  bool clustered = false;     // the interval resamples contexts (cluster bootstrap)
  double mean_a = 0;
  double mean_b = 0;
  double estimate = 0;  // Δ̂ = mean(a − b)
  double ci_lower = 0;  // percentile interval at 1 − alpha
  double ci_upper = 0;
  double family_lower = 0;  // percentile interval at 1 − alpha/m
  double family_upper = 0;
  double p_bootstrap = 1;    // one-sided, H1: Δ > 0
  double p_two_sided = 1;    // bootstrap, two-sided
  std::string test;          // "bootstrap", "cluster-bootstrap" or "mcnemar-exact"
  double p_test = 1;         // the one-sided p of `test`
  double p_test_less = 1;    // the same test for the other side, H1: Δ < 0
  bool significant = false;  // p_test ≤ alpha/m
  std::int64_t a_only = 0;   // McNemar discordant counts (mcnemar-exact only)
  std::int64_t b_only = 0;
  std::uint64_t replicate_hash = 0;
};

// `task_sizes[t]` is the number of instances task t has in the manifest (for stratum ids).
std::vector<PairedRowResult> run_paired_rows(const std::vector<PairedRow>& rows,
                                             const std::vector<std::int64_t>& task_sizes,
                                             const BootstrapSettings& settings);

// The instance count below which 0/1 rows use the exact McNemar test.
inline constexpr std::int64_t kMcNemarBelow = 50;

}  // namespace kvaudit::reduce
