// Paired comparisons through the stratified paired bootstrap (see paired_rows.h).
#include "suite/reduce/paired_rows.h"

#include <algorithm>
#include <map>
#include <thread>

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

}  // namespace

std::vector<PairedRowResult> run_paired_rows(const std::vector<PairedRow>& rows,
                                             const std::vector<std::int64_t>& task_sizes,
                                             const BootstrapSettings& settings) {
  std::vector<PairedRowResult> results(rows.size());
  // Stratum ids of task strata with missing instances, by (task, instance list).
  std::map<std::pair<std::uint32_t, std::vector<std::int64_t>>, std::uint32_t> subset_ids;

  std::vector<stats::PairedComparison> comparisons;
  std::vector<std::size_t> comparison_row;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const PairedRow& row = rows[r];
    PairedRowResult& res = results[r];
    if (row.instances.empty()) continue;
    std::vector<PairedInstance> inst = row.instances;
    std::sort(inst.begin(), inst.end(), [](const PairedInstance& x, const PairedInstance& y) {
      return x.task != y.task ? x.task < y.task : x.instance < y.instance;
    });
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
      const std::uint32_t task = inst[i].task;
      bool whole = static_cast<std::int64_t>(ids.size()) == task_sizes.at(task);
      for (std::size_t k = 0; whole && k < ids.size(); ++k)
        whole = ids[k] == static_cast<std::int64_t>(k);
      if (whole) {
        st.id = task;
      } else {
        auto [it, fresh] =
            subset_ids.emplace(std::make_pair(task, ids),
                               kSubsetStratumBase + static_cast<std::uint32_t>(subset_ids.size()));
        st.id = it->second;
      }
      cmp.strata.push_back(std::move(st));
      i = j;
    }
    res.empty = false;
    res.instances = static_cast<std::int64_t>(inst.size());
    res.strata = static_cast<std::int64_t>(cmp.strata.size());
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

  const std::size_t batch = options.comparisons_per_pass;
  for (std::size_t start = 0; start < comparisons.size(); start += batch) {
    const std::size_t end = std::min(comparisons.size(), start + batch);
    const std::vector<stats::PairedComparison> part(comparisons.begin() + start,
                                                    comparisons.begin() + end);
    auto boot = stats::paired_bootstrap_batch(part, options);
    parallel_for(boot.size(), settings.threads, [&](std::size_t k) {
      stats::BootstrapResult& b = boot[k];
      const PairedRow& row = rows[comparison_row[start + k]];
      PairedRowResult& res = results[comparison_row[start + k]];
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
      res.p_two_sided =
          std::min(1.0, 2.0 * static_cast<double>(std::min(b.at_or_below_zero, at_or_above) + 1) /
                            denominator);
      const double family_alpha =
          row.family != nullptr ? row.family->per_comparison_alpha() : settings.alpha;
      res.family_lower = stats::quantile_type7(b.sorted_replicates, family_alpha / 2);
      res.family_upper = stats::quantile_type7(b.sorted_replicates, 1 - family_alpha / 2);
      if (res.test == "bootstrap") {
        res.p_test = res.p_bootstrap;
        res.p_test_less = static_cast<double>(at_or_above + 1) / denominator;
      }
      res.significant = res.p_test <= family_alpha;
      std::vector<double>().swap(b.sorted_replicates);
    });
  }
  return results;
}

}  // namespace kvaudit::reduce
