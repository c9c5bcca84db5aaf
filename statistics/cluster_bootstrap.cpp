// The stratified paired cluster bootstrap: validation, the plan (cluster sums transposed per
// stratum), the replicate kernel, the leave-one-cluster-out jackknife and the thread driver.
// Procedure in cluster_bootstrap.h.
#include "statistics/cluster_bootstrap.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "base/errors.h"
#include "statistics/bootstrap_plan.h"
#include "statistics/rng.h"

namespace kvaudit::stats {
namespace {

constexpr std::size_t kMaxClusters = 0xffffffffull;  // indices are 32-bit

std::string name_in_quotes(const std::string& name) { return "'" + name + "'"; }

// The integer path's condition, as in paired_bootstrap (exact_integer means the same there).
bool fits_integer_path(double d) { return d == std::nearbyint(d) && d >= -127.0 && d <= 127.0; }

// For each instance its cluster number k (order of first appearance), and the sizes n_k.
struct ClusterLayout {
  std::vector<std::uint32_t> number;  // per instance
  std::vector<std::uint32_t> sizes;   // per cluster
};

ClusterLayout layout_of(const ClusteredPairedStratum& stratum) {
  ClusterLayout layout;
  layout.number.reserve(stratum.cluster.size());
  std::unordered_map<std::uint32_t, std::uint32_t> numbers;
  for (const std::uint32_t id : stratum.cluster) {
    const auto [it, inserted] =
        numbers.try_emplace(id, static_cast<std::uint32_t>(layout.sizes.size()));
    if (inserted) layout.sizes.push_back(0);
    ++layout.sizes[it->second];
    layout.number.push_back(it->second);
  }
  return layout;
}

}  // namespace

void validate_clustered_comparisons(const std::vector<ClusteredPairedComparison>& comparisons,
                                    std::size_t first, std::size_t count) {
  if (first + count > comparisons.size()) {
    throw InternalError("validate_clustered_comparisons: range past the end");
  }
  // stratum id -> (cluster sizes, name of the first comparison that used it)
  std::map<std::uint32_t, std::pair<std::vector<std::uint32_t>, std::string>> layouts;
  for (std::size_t c = first; c < first + count; ++c) {
    const ClusteredPairedComparison& comparison = comparisons[c];
    const std::string where = "cluster bootstrap: comparison " + name_in_quotes(comparison.name);
    if (comparison.strata.empty()) throw InputError(where + ": no strata");
    std::set<std::uint32_t> seen;
    for (const ClusteredPairedStratum& stratum : comparison.strata) {
      const std::string at = where + ", stratum " + std::to_string(stratum.id);
      if (!seen.insert(stratum.id).second) throw InputError(at + ": stratum id appears twice");
      if (stratum.arm_a.size() != stratum.arm_b.size()) {
        throw InputError(at + ": arm A has " + std::to_string(stratum.arm_a.size()) +
                         " instances but arm B has " + std::to_string(stratum.arm_b.size()) +
                         " (arms must be paired instance by instance)");
      }
      if (stratum.cluster.size() != stratum.arm_a.size()) {
        throw InputError(at + ": " + std::to_string(stratum.arm_a.size()) + " instances but " +
                         std::to_string(stratum.cluster.size()) +
                         " cluster ids (one cluster id per instance)");
      }
      if (stratum.arm_a.empty()) throw InputError(at + ": no instances");
      if (stratum.arm_a.size() > kMaxClusters) {
        throw InputError(at + ": more than 2^32 - 1 instances");
      }
      for (std::size_t i = 0; i < stratum.arm_a.size(); ++i) {
        if (!std::isfinite(stratum.arm_a[i]) || !std::isfinite(stratum.arm_b[i])) {
          throw InputError(at + ": utility of instance " + std::to_string(i) + " is not finite");
        }
      }
      ClusterLayout layout = layout_of(stratum);
      const auto [it, inserted] =
          layouts.try_emplace(stratum.id, std::move(layout.sizes), comparison.name);
      if (!inserted && it->second.first != layout_of(stratum).sizes) {
        throw InputError(at +
                         ": its clusters (count and sizes in order of first appearance) "
                         "differ from those of comparison " +
                         name_in_quotes(it->second.second) +
                         " for the same stratum id (a stratum id must name the same clusters "
                         "in every comparison)");
      }
    }
  }
}

ClusterBootstrapPlan::ClusterBootstrapPlan(
    const std::vector<ClusteredPairedComparison>& comparisons, std::size_t first, std::size_t count,
    Aggregate aggregate)
    : aggregate_(aggregate) {
  validate_clustered_comparisons(comparisons, first, count);
  std::map<std::uint32_t, std::vector<std::uint32_t>> sizes;
  for (std::size_t c = first; c < first + count; ++c) {
    for (const ClusteredPairedStratum& stratum : comparisons[c].strata) {
      sizes[stratum.id] = layout_of(stratum).sizes;
    }
  }
  std::map<std::uint32_t, std::size_t> position;
  for (auto& [id, cluster_sizes] : sizes) {
    position[id] = strata_.size();
    Stratum stratum;
    stratum.id = id;
    for (const std::uint32_t n : cluster_sizes) stratum.instances += n;
    stratum.cluster_sizes = std::move(cluster_sizes);
    max_clusters_ =
        std::max(max_clusters_, static_cast<std::uint32_t>(stratum.cluster_sizes.size()));
    strata_.push_back(std::move(stratum));
  }

  for (std::size_t c = first; c < first + count; ++c) {
    const ClusteredPairedComparison& input = comparisons[c];
    Comparison comparison;
    comparison.name = input.name;
    // Parts in ascending stratum id: the order in which replicates (and the estimate) add them.
    std::vector<const ClusteredPairedStratum*> ordered;
    for (const ClusteredPairedStratum& stratum : input.strata) ordered.push_back(&stratum);
    std::sort(ordered.begin(), ordered.end(),
              [](const ClusteredPairedStratum* x, const ClusteredPairedStratum* y) {
                return x->id < y->id;
              });
    comparison.integer = true;
    bool have_first = false;
    double first_difference = 0;
    for (const ClusteredPairedStratum* stratum : ordered) {
      for (std::size_t i = 0; i < stratum->arm_a.size(); ++i) {
        const double d = stratum->arm_a[i] - stratum->arm_b[i];
        if (!fits_integer_path(d)) comparison.integer = false;
        if (!have_first) {
          first_difference = d;
          have_first = true;
        } else if (d != first_difference) {
          comparison.one_distinct_difference = false;
        }
      }
    }
    double total_a = 0;
    double total_b = 0;
    double total_d = 0;
    for (const ClusteredPairedStratum* stratum : ordered) {
      const ClusterLayout layout = layout_of(*stratum);
      Part part;
      part.stratum = position.at(stratum->id);
      const std::size_t clusters = layout.sizes.size();
      const std::size_t n = stratum->arm_a.size();
      double sum_a = 0;
      double sum_b = 0;
      if (comparison.integer) {
        part.offset = comparison.integer_sums.size();
        comparison.integer_sums.resize(part.offset + clusters, 0);
        std::int64_t sum = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const auto d = static_cast<std::int64_t>(stratum->arm_a[i] - stratum->arm_b[i]);
          comparison.integer_sums[part.offset + layout.number[i]] += d;
          sum += d;
          sum_a += stratum->arm_a[i];
          sum_b += stratum->arm_b[i];
        }
        part.sum = static_cast<double>(sum);
      } else {
        part.offset = comparison.double_sums.size();
        comparison.double_sums.resize(part.offset + clusters, 0.0);
        double sum = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const double d = stratum->arm_a[i] - stratum->arm_b[i];
          comparison.double_sums[part.offset + layout.number[i]] += d;
          sum += d;
          sum_a += stratum->arm_a[i];
          sum_b += stratum->arm_b[i];
        }
        part.sum = sum;
      }
      comparison.instances += static_cast<std::int64_t>(n);
      comparison.clusters += static_cast<std::int64_t>(clusters);
      if (aggregate_ == Aggregate::pooled) {
        total_a += sum_a;
        total_b += sum_b;
        total_d += part.sum;
      } else {
        const auto size = static_cast<std::uint32_t>(n);
        total_a += sum_a / size;
        total_b += sum_b / size;
        total_d += part.sum / size;
      }
      comparison.parts.push_back(part);
    }
    const double divisor = aggregate_ == Aggregate::pooled
                               ? static_cast<double>(comparison.instances)
                               : static_cast<double>(comparison.parts.size());
    comparison.mean_a = total_a / divisor;
    comparison.mean_b = total_b / divisor;
    comparison.estimate = total_d / divisor;
    comparisons_.push_back(std::move(comparison));
  }

  // Transpose the cluster sums: per stratum, row k = S_k of every comparison on the stratum.
  rows_.assign(strata_.size(), StratumRows{});
  for (std::size_t c = 0; c < comparisons_.size(); ++c) {
    for (const Part& part : comparisons_[c].parts) {
      StratumRows& rows = rows_[part.stratum];
      (comparisons_[c].integer ? rows.integer_comparisons : rows.double_comparisons)
          .push_back(static_cast<std::uint32_t>(c));
    }
  }
  for (std::size_t s = 0; s < strata_.size(); ++s) {
    StratumRows& rows = rows_[s];
    const std::size_t clusters = strata_[s].cluster_sizes.size();
    const std::size_t integer_width = rows.integer_comparisons.size();
    const std::size_t double_width = rows.double_comparisons.size();
    rows.integer_rows.assign(clusters * integer_width, 0);
    rows.double_rows.assign(clusters * double_width, 0.0);
    const auto offset_in = [&](const Comparison& comparison) {
      for (const Part& part : comparison.parts) {
        if (part.stratum == s) return part.offset;
      }
      throw InternalError("ClusterBootstrapPlan: a comparison lost its stratum");
    };
    for (std::size_t lane = 0; lane < integer_width; ++lane) {
      const Comparison& comparison = comparisons_[rows.integer_comparisons[lane]];
      const std::size_t offset = offset_in(comparison);
      for (std::size_t k = 0; k < clusters; ++k) {
        rows.integer_rows[k * integer_width + lane] = comparison.integer_sums[offset + k];
      }
    }
    for (std::size_t lane = 0; lane < double_width; ++lane) {
      const Comparison& comparison = comparisons_[rows.double_comparisons[lane]];
      const std::size_t offset = offset_in(comparison);
      for (std::size_t k = 0; k < clusters; ++k) {
        rows.double_rows[k * double_width + lane] = comparison.double_sums[offset + k];
      }
    }
  }
}

void ClusterBootstrapPlan::replicate_range(std::uint64_t seed, std::uint32_t begin,
                                           std::uint32_t end, std::uint32_t out_offset,
                                           std::vector<std::vector<double>>& out) const {
  std::vector<std::uint32_t> indices(max_clusters_);
  std::size_t integer_lanes = 0;
  std::size_t double_lanes = 0;
  for (const StratumRows& rows : rows_) {
    integer_lanes = std::max(integer_lanes, rows.integer_comparisons.size());
    double_lanes = std::max(double_lanes, rows.double_comparisons.size());
  }
  std::vector<std::int64_t> integer_acc(integer_lanes);
  std::vector<double> double_acc(double_lanes);
  std::vector<std::int64_t> integer_totals(comparisons_.size());
  std::vector<double> totals(comparisons_.size());
  std::vector<std::int64_t> drawn_instances(comparisons_.size());
  const bool pooled = aggregate_ == Aggregate::pooled;
  for (std::uint32_t b = begin; b < end; ++b) {
    std::fill(integer_totals.begin(), integer_totals.end(), 0);
    std::fill(totals.begin(), totals.end(), 0.0);
    std::fill(drawn_instances.begin(), drawn_instances.end(), 0);
    for (std::size_t s = 0; s < strata_.size(); ++s) {
      const Stratum& stratum = strata_[s];
      const StratumRows& rows = rows_[s];
      const auto clusters = static_cast<std::uint32_t>(stratum.cluster_sizes.size());
      draw_resample_indices(seed, stratum.id, b, RandomPurpose::bootstrap_index, clusters,
                            indices.data());
      // The resample's instance count in this stratum (the same for every comparison on it).
      std::int64_t instances = 0;
      for (std::uint32_t j = 0; j < clusters; ++j) instances += stratum.cluster_sizes[indices[j]];

      const std::size_t integer_width = rows.integer_comparisons.size();
      std::fill_n(integer_acc.begin(), integer_width, 0);
      for (std::uint32_t j = 0; j < clusters; ++j) {
        const std::int64_t* row = rows.integer_rows.data() + indices[j] * integer_width;
        for (std::size_t lane = 0; lane < integer_width; ++lane) integer_acc[lane] += row[lane];
      }
      const std::size_t double_width = rows.double_comparisons.size();
      std::fill_n(double_acc.begin(), double_width, 0.0);
      for (std::uint32_t j = 0; j < clusters; ++j) {
        const double* row = rows.double_rows.data() + indices[j] * double_width;
        for (std::size_t lane = 0; lane < double_width; ++lane) double_acc[lane] += row[lane];
      }

      for (std::size_t lane = 0; lane < integer_width; ++lane) {
        const std::uint32_t c = rows.integer_comparisons[lane];
        if (pooled) {
          integer_totals[c] += integer_acc[lane];
          drawn_instances[c] += instances;
        } else {
          totals[c] += static_cast<double>(integer_acc[lane]) / static_cast<double>(instances);
        }
      }
      for (std::size_t lane = 0; lane < double_width; ++lane) {
        const std::uint32_t c = rows.double_comparisons[lane];
        if (pooled) {
          totals[c] += double_acc[lane];
          drawn_instances[c] += instances;
        } else {
          totals[c] += double_acc[lane] / static_cast<double>(instances);
        }
      }
    }
    for (std::size_t c = 0; c < comparisons_.size(); ++c) {
      const Comparison& comparison = comparisons_[c];
      double value = 0;
      if (pooled) {
        const double total =
            comparison.integer ? static_cast<double>(integer_totals[c]) : totals[c];
        value = total / static_cast<double>(drawn_instances[c]);
      } else {
        value = totals[c] / static_cast<double>(comparison.parts.size());
      }
      out[c][b - out_offset] = value;
    }
  }
}

void ClusterBootstrapPlan::replicates(std::uint64_t seed, std::int64_t begin, std::int64_t end,
                                      int threads, std::vector<std::vector<double>>& out) const {
  run_replicate_ranges("ClusterBootstrapPlan::replicates", begin, end, threads, comparisons_.size(),
                       out, [&](std::uint32_t lo, std::uint32_t hi, std::uint32_t b0) {
                         replicate_range(seed, lo, hi, b0, out);
                       });
}

std::vector<double> ClusterBootstrapPlan::jackknife(std::size_t c) const {
  const Comparison& comparison = comparisons_[c];
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(comparison.clusters));
  const auto cluster_sum = [&](const Part& part, std::size_t k) {
    return comparison.integer ? static_cast<double>(comparison.integer_sums[part.offset + k])
                              : comparison.double_sums[part.offset + k];
  };
  if (aggregate_ == Aggregate::pooled) {
    double total = 0;
    for (const Part& part : comparison.parts) total += part.sum;
    for (const Part& part : comparison.parts) {
      const std::vector<std::uint32_t>& sizes = strata_[part.stratum].cluster_sizes;
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        const auto remaining = static_cast<double>(comparison.instances - sizes[k]);
        values.push_back((total - cluster_sum(part, k)) / remaining);
      }
    }
  } else {
    double total_of_means = 0;
    for (const Part& part : comparison.parts) {
      total_of_means += part.sum / strata_[part.stratum].instances;
    }
    const auto strata = static_cast<double>(comparison.parts.size());
    for (const Part& part : comparison.parts) {
      const Stratum& stratum = strata_[part.stratum];
      const double others = total_of_means - part.sum / stratum.instances;
      for (std::size_t k = 0; k < stratum.cluster_sizes.size(); ++k) {
        const auto remaining = static_cast<double>(stratum.instances - stratum.cluster_sizes[k]);
        values.push_back((others + (part.sum - cluster_sum(part, k)) / remaining) / strata);
      }
    }
  }
  return values;
}

BootstrapResult ClusterBootstrapPlan::summarize(std::size_t c, std::vector<double> replicates,
                                                std::int64_t at_or_below_zero,
                                                const BootstrapOptions& options) const {
  const Comparison& comparison = comparisons_[c];
  BootstrapResult result;
  result.name = comparison.name;
  result.aggregate = aggregate_;
  result.instances = comparison.instances;
  result.strata = static_cast<std::int64_t>(comparison.parts.size());
  result.clusters = comparison.clusters;
  result.mean_a = comparison.mean_a;
  result.mean_b = comparison.mean_b;
  result.estimate = comparison.estimate;
  result.exact_integer = comparison.integer;
  std::string bca_precheck;
  if (options.bca) {
    const bool pooled = aggregate_ == Aggregate::pooled;
    const bool single_cluster =
        pooled
            ? comparison.clusters < 2
            : std::any_of(comparison.parts.begin(), comparison.parts.end(), [&](const Part& part) {
                return strata_[part.stratum].cluster_sizes.size() < 2;
              });
    if (comparison.one_distinct_difference) {
      bca_precheck = "BCa undefined: every paired difference is equal";
    } else if (single_cluster) {
      bca_precheck = pooled ? "BCa undefined: the jackknife needs 2 or more clusters"
                            : "BCa undefined: the jackknife needs 2 or more clusters per stratum";
    }
  }
  finish_bootstrap_result(result, std::move(replicates), at_or_below_zero, options, bca_precheck,
                          [&] { return jackknife(c); });
  return result;
}

BootstrapResult cluster_paired_bootstrap(const ClusteredPairedComparison& comparison,
                                         const BootstrapOptions& options) {
  return cluster_paired_bootstrap_batch({comparison}, options).front();
}

std::vector<BootstrapResult> cluster_paired_bootstrap_batch(
    const std::vector<ClusteredPairedComparison>& comparisons, const BootstrapOptions& options) {
  validate_bootstrap_options(options);
  validate_clustered_comparisons(comparisons, 0, comparisons.size());
  return bootstrap_batch<ClusterBootstrapPlan>(comparisons, options, resolve_threads(options));
}

}  // namespace kvaudit::stats
