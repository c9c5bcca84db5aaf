// Paired comparisons through the stratified paired bootstrap, or its cluster form for rows with a
// reuse arm (see paired_rows.h).
#include "suite/reduce/paired_rows.h"

#include <algorithm>
#include <map>
#include <thread>

#include "statistics/cluster_bootstrap.h"
#include "statistics/mcnemar.h"
#include "statistics/paired_bootstrap.h"

namespace kvaudit::reduce {
namespace {

// First stratum id handed to a task stratum with missing instances (task ids stay below it).
constexpr std::uint32_t kSubsetStratumBase = 0x01000000u;

bool is_zero_one(double v) { return v == 0.0 || v == 1.0; }

// Runs fn(i) for i in [0, n) on up to `threads` threads.
template <typename Fn>
void parallel_for(std::size_t n, int threads, Fn fn) {
  std::size_t workers = threads > 0 ? static_cast<std::size_t>(threads)
                                    : std::max(1u, std::thread::hardware_concurrency());
  workers = std::min(workers, n);
  if (workers <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::vector<std::thread> pool;
  for (std::size_t w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (std::size_t i = w; i < n; i += workers) fn(i);
    });
  for (auto& t : pool) t.join();
}

// Stratum ids (paired_rows.h §Common random numbers). Ids of per-question strata and of
// clustered strata are assigned separately: the two kinds run in separate batches.
class StratumIds {
 public:
  explicit StratumIds(const std::vector<std::int64_t>& task_sizes) : task_sizes_(&task_sizes) {}

  // Per-question stratum of `task` holding instances `ids` (ascending).
  std::uint32_t plain(std::uint32_t task, const std::vector<std::int64_t>& ids) {
    bool whole = static_cast<std::int64_t>(ids.size()) == task_sizes_->at(task);
    for (std::size_t k = 0; whole && k < ids.size(); ++k)
      whole = ids[k] == static_cast<std::int64_t>(k);
    return whole ? task : subset(task, ids);
  }

  // Clustered stratum of `task`: contexts[i] and questions[i] of each pair (ascending by
  // (context, question)), `sizes` the cluster sizes in context order.
  std::uint32_t clustered(std::uint32_t task, const std::vector<std::int64_t>& contexts,
                          const std::vector<std::uint32_t>& questions,
                          const std::vector<std::uint32_t>& sizes) {
    bool whole = static_cast<std::int64_t>(sizes.size()) == task_sizes_->at(task);
    for (std::size_t i = 0, k = 0; whole && k < sizes.size(); i += sizes[k], ++k)
      whole = contexts[i] == static_cast<std::int64_t>(k);
    if (whole) {
      const auto [it, fresh] = whole_sizes_.emplace(task, sizes);
      if (it->second == sizes) return task;
    }
    std::vector<std::int64_t> key;
    key.reserve(contexts.size());
    for (std::size_t i = 0; i < contexts.size(); ++i)
      key.push_back(contexts[i] * (std::int64_t{1} << 32) + questions[i]);
    return subset(task, key);
  }

 private:
  std::uint32_t subset(std::uint32_t task, const std::vector<std::int64_t>& ids) {
    const auto [it, fresh] =
        subset_ids_.emplace(std::make_pair(task, ids),
                            kSubsetStratumBase + static_cast<std::uint32_t>(subset_ids_.size()));
    return it->second;
  }
  const std::vector<std::int64_t>* task_sizes_;
  std::map<std::pair<std::uint32_t, std::vector<std::int64_t>>, std::uint32_t> subset_ids_;
  std::map<std::uint32_t, std::vector<std::uint32_t>> whole_sizes_;  // task -> cluster sizes
};

// Copies a bootstrap result into the row's result: intervals at both levels, p-values, the test.
void fill_result(stats::BootstrapResult& b, const PairedRow& row, const BootstrapSettings& settings,
                 PairedRowResult& res) {
  res.mean_a = b.mean_a;
  res.mean_b = b.mean_b;
  res.estimate = b.estimate;
  res.ci_lower = b.lower;
  res.ci_upper = b.upper;
  res.p_bootstrap = b.p_value;
  res.replicate_hash = b.replicate_hash;
  std::int64_t at_or_above = 0;
  for (double v : b.sorted_replicates)
    if (v >= 0) ++at_or_above;
  const double denominator = static_cast<double>(b.resamples + 1);
  res.p_two_sided = std::min(
      1.0, 2.0 * static_cast<double>(std::min(b.at_or_below_zero, at_or_above) + 1) / denominator);
  const double family_alpha =
      row.family != nullptr ? row.family->per_comparison_alpha() : settings.alpha;
  res.family_lower = stats::quantile_type7(b.sorted_replicates, family_alpha / 2);
  res.family_upper = stats::quantile_type7(b.sorted_replicates, 1 - family_alpha / 2);
  if (res.test != "mcnemar-exact") {
    res.p_test = res.p_bootstrap;
    res.p_test_less = static_cast<double>(at_or_above + 1) / denominator;
  }
  res.significant = res.p_test <= family_alpha;
  std::vector<double>().swap(b.sorted_replicates);
}

// Runs `comparisons` through `batch_fn` in batches of settings.rows_per_batch and fills the
// results of their rows.
template <typename Comparison, typename BatchFn>
void run_batches(const std::vector<Comparison>& comparisons,
                 const std::vector<std::size_t>& comparison_row, const std::vector<PairedRow>& rows,
                 const BootstrapSettings& settings, const stats::BootstrapOptions& options,
                 BatchFn batch_fn, std::vector<PairedRowResult>& results) {
  const std::size_t batch = options.comparisons_per_pass;
  for (std::size_t start = 0; start < comparisons.size(); start += batch) {
    const std::size_t end = std::min(comparisons.size(), start + batch);
    const std::vector<Comparison> part(comparisons.begin() + static_cast<std::ptrdiff_t>(start),
                                       comparisons.begin() + static_cast<std::ptrdiff_t>(end));
    auto boot = batch_fn(part, options);
    parallel_for(boot.size(), settings.threads, [&](std::size_t k) {
      const std::size_t r = comparison_row[start + k];
      fill_result(boot[k], rows[r], settings, results[r]);
    });
  }
}

}  // namespace

std::vector<PairedRowResult> run_paired_rows(const std::vector<PairedRow>& rows,
                                             const std::vector<std::int64_t>& task_sizes,
                                             const BootstrapSettings& settings) {
  std::vector<PairedRowResult> results(rows.size());
  StratumIds plain_ids(task_sizes), clustered_ids(task_sizes);

  std::vector<stats::PairedComparison> comparisons;
  std::vector<std::size_t> comparison_row;
  std::vector<stats::ClusteredPairedComparison> clustered;
  std::vector<std::size_t> clustered_row;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const PairedRow& row = rows[r];
    PairedRowResult& res = results[r];
    if (row.instances.empty()) continue;
    std::vector<PairedInstance> inst = row.instances;
    std::sort(inst.begin(), inst.end(), [](const PairedInstance& x, const PairedInstance& y) {
      return x.task != y.task           ? x.task < y.task
             : x.instance != y.instance ? x.instance < y.instance
                                        : x.question < y.question;
    });
    res.empty = false;
    res.instances = static_cast<std::int64_t>(inst.size());
    if (row.clustered) {
      stats::ClusteredPairedComparison cmp;
      cmp.name = row.name;
      for (std::size_t i = 0; i < inst.size();) {
        std::size_t j = i;
        stats::ClusteredPairedStratum st;
        std::vector<std::int64_t> contexts;
        std::vector<std::uint32_t> questions, sizes;
        while (j < inst.size() && inst[j].task == inst[i].task) {
          st.arm_a.push_back(inst[j].a);
          st.arm_b.push_back(inst[j].b);
          // Context indices are below 2^24 (cell_lookup.h), so they fit the cluster id.
          st.cluster.push_back(static_cast<std::uint32_t>(inst[j].instance));
          if (contexts.empty() || contexts.back() != inst[j].instance) sizes.push_back(0);
          ++sizes.back();
          contexts.push_back(inst[j].instance);
          questions.push_back(inst[j].question);
          ++j;
        }
        st.id = clustered_ids.clustered(inst[i].task, contexts, questions, sizes);
        res.clusters += static_cast<std::int64_t>(sizes.size());
        cmp.strata.push_back(std::move(st));
        i = j;
      }
      res.strata = static_cast<std::int64_t>(cmp.strata.size());
      res.clustered = true;
      res.test = "cluster-bootstrap";
      clustered.push_back(std::move(cmp));
      clustered_row.push_back(r);
      continue;
    }
    stats::PairedComparison cmp;
    cmp.name = row.name;
    bool binary_single = true;
    std::vector<std::uint8_t> a01, b01;
    for (std::size_t i = 0; i < inst.size();) {
      std::size_t j = i;
      stats::PairedStratum st;
      std::vector<std::int64_t> ids;
      while (j < inst.size() && inst[j].task == inst[i].task) {
        st.arm_a.push_back(inst[j].a);
        st.arm_b.push_back(inst[j].b);
        ids.push_back(inst[j].instance);
        if (inst[j].pairs != 1 || !is_zero_one(inst[j].a) || !is_zero_one(inst[j].b)) {
          binary_single = false;
        } else {
          a01.push_back(static_cast<std::uint8_t>(inst[j].a));
          b01.push_back(static_cast<std::uint8_t>(inst[j].b));
        }
        ++j;
      }
      st.id = plain_ids.plain(inst[i].task, ids);
      cmp.strata.push_back(std::move(st));
      i = j;
    }
    res.strata = static_cast<std::int64_t>(cmp.strata.size());
    res.clusters = res.instances;
    if (binary_single && res.instances < kMcNemarBelow) {
      const auto mc = stats::exact_mcnemar(a01, b01);
      res.test = "mcnemar-exact";
      res.p_test = mc.p_greater;
      res.p_test_less = mc.p_less;
      res.a_only = mc.a_only;
      res.b_only = mc.b_only;
    } else {
      res.test = "bootstrap";
    }
    comparisons.push_back(std::move(cmp));
    comparison_row.push_back(r);
  }

  stats::BootstrapOptions options;
  options.resamples = settings.resamples;
  options.seed = settings.seed;
  options.confidence = 1 - settings.alpha;
  options.aggregate = stats::Aggregate::pooled;
  options.threads = settings.threads;
  options.keep_sorted_replicates = true;
  options.comparisons_per_pass = std::max<std::size_t>(settings.rows_per_batch, 1);

  run_batches(
      comparisons, comparison_row, rows, settings, options,
      [](const auto& part, const auto& o) { return stats::paired_bootstrap_batch(part, o); },
      results);
  run_batches(
      clustered, clustered_row, rows, settings, options,
      [](const auto& part, const auto& o) {
        return stats::cluster_paired_bootstrap_batch(part, o);
      },
      results);
  return results;
}

}  // namespace kvaudit::reduce
