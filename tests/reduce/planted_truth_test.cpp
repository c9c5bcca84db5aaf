// reduce recovers what the synthetic study planted (tests/reduce/synthetic_study.h): protocol gaps,
// the backend shift, the best-of-3 ordering, accuracies, and certification counts that match the
// generator's own utilities exactly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "statistics/binomial.h"
#include "tests/reduce/test_support.h"

namespace kvaudit::reduce::testing {
namespace {

class PlantedTruth : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One directory per process: ctest runs each test of this suite as its own process, in
    // parallel, and every one of them builds the suite's study.
    dir_ = std::filesystem::path(KVAUDIT_REDUCE_TEST_TMP) /
           ("PlantedTruth.pid" + std::to_string(::getpid()));
    const auto& dir = dir_;
    std::filesystem::remove_all(dir);
    study_ = new SyntheticStudy(write_synthetic_study(dir, cfg_));
    result_ = new ReduceResult(reduce_study(options_for(*study_)));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete study_;
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  static std::string label(const PairedAnalysis& a, const PairedAnalysisRow& r, Dim d) {
    const auto it = std::find(a.dims.begin(), a.dims.end(), d);
    const auto code = r.key[static_cast<std::size_t>(it - a.dims.begin())];
    const auto& m = result_->study->manifest;
    switch (d) {
      case Dim::model:
        return m.models[static_cast<std::size_t>(code)].name;
      case Dim::backend:
        return manifest::kAttentionBackendNames[code];
      case Dim::method:
        return code < 0 ? "full" : m.methods[static_cast<std::size_t>(code)].name;
      case Dim::protocol:
        return manifest::kProtocolNames[code];
      case Dim::budget:
        return result_->frame->budgets[static_cast<std::size_t>(code)].label;
      default:
        return "";
    }
  }
  static double compression_of(const PairedAnalysis& a, const PairedAnalysisRow& r) {
    const auto it = std::find(a.dims.begin(), a.dims.end(), Dim::budget);
    return result_->frame
        ->budgets[static_cast<std::size_t>(r.key[static_cast<std::size_t>(it - a.dims.begin())])]
        .value;
  }
  static std::size_t model_index(const std::string& name) {
    return static_cast<std::size_t>(std::find(cfg_.models.begin(), cfg_.models.end(), name) -
                                    cfg_.models.begin());
  }

  static inline std::filesystem::path dir_;
  static inline SyntheticConfig cfg_{};
  static inline SyntheticStudy* study_ = nullptr;
  static inline ReduceResult* result_ = nullptr;
};

TEST_F(PlantedTruth, StudyIsCompleteAndEveryRowIsComputed) {
  EXPECT_TRUE(result_->complete());
  EXPECT_EQ(result_->coverage.total.expected, 30720);
  EXPECT_EQ(result_->coverage.total.ok, 30720);
  for (const auto& r : result_->protocol_gap.per_budget.rows) {
    EXPECT_FALSE(r.result.empty);
    EXPECT_EQ(r.result.instances, 240);  // 6 tasks x 40 instances, one pair each
    EXPECT_EQ(r.result.strata, 6);
    EXPECT_FALSE(r.pairs.partial());
  }
}

TEST_F(PlantedTruth, ProtocolGapFamilyIntervalsCoverThePlantedGap) {
  const auto& gap = result_->protocol_gap.per_budget;
  ASSERT_EQ(gap.rows.size(), 2u * 2u * 5u * 3u);  // model x backend x method x budget
  EXPECT_TRUE(gap.family.declared);
  EXPECT_EQ(gap.family.name, "protocol-gap");
  EXPECT_EQ(gap.family.m, 60);
  for (const auto& r : gap.rows) {
    const std::string method = label(gap, r, Dim::method);
    const double truth =
        p_full(cfg_, model_index(label(gap, r, Dim::model)), label(gap, r, Dim::backend)) *
        planted(cfg_, method).gap;
    EXPECT_LE(r.result.family_lower, truth) << method << " " << label(gap, r, Dim::budget);
    EXPECT_GE(r.result.family_upper, truth) << method << " " << label(gap, r, Dim::budget);
    EXPECT_LE(r.result.family_lower, r.result.ci_lower);
    EXPECT_GE(r.result.family_upper, r.result.ci_upper);
    if (method == "snapkv") {
      EXPECT_TRUE(r.result.significant);  // Δ ≈ 0.2, n = 240
      EXPECT_LT(r.result.p_test, 1e-3);
    } else {
      // Query-independent methods: the two protocols give identical utilities here.
      EXPECT_EQ(r.result.estimate, 0.0);
      EXPECT_FALSE(r.result.significant);
    }
  }
}

TEST_F(PlantedTruth, PooledGapCoversTheAverageOverModels) {
  const auto& pooled = result_->protocol_gap.pooled;
  ASSERT_EQ(pooled.rows.size(), 2u * 5u);  // backend x method
  for (const auto& r : pooled.rows) {
    const std::string backend = label(pooled, r, Dim::backend);
    const std::string method = label(pooled, r, Dim::method);
    double truth = 0;
    for (std::size_t m = 0; m < cfg_.models.size(); ++m)
      truth += p_full(cfg_, m, backend) * planted(cfg_, method).gap /
               static_cast<double>(cfg_.models.size());
    EXPECT_LE(r.result.ci_lower, truth) << backend << " " << method;
    EXPECT_GE(r.result.ci_upper, truth) << backend << " " << method;
    EXPECT_EQ(r.result.instances, 240);  // instances pooled over models and budgets
  }
}

TEST_F(PlantedTruth, BackendConfoundRecoversTheShift) {
  const auto& bc = result_->backend_confound;
  ASSERT_EQ(bc.full_kv.rows.size(), 2u * 2u);  // model x protocol
  for (const auto& r : bc.full_kv.rows) {
    EXPECT_LE(r.result.family_lower, cfg_.backend_shift);
    EXPECT_GE(r.result.family_upper, cfg_.backend_shift);
    EXPECT_GT(r.result.estimate, 0.05);
    EXPECT_TRUE(r.result.significant);
    EXPECT_EQ(r.result.instances, 240);
  }
  ASSERT_EQ(bc.gaps.size(), bc.full_kv.rows.size());
  // Rankings: both backends keep the methods' order (the shift scales every method alike).
  ASSERT_FALSE(bc.rankings.empty());
  for (const auto& ra : bc.rankings) {
    EXPECT_EQ(ra.methods.size(), 5u);
    EXPECT_GT(ra.tau_b, 0.5);
  }
}

TEST_F(PlantedTruth, KeydiffBeatsTheBestBaselineAndSnapkvLosesWithoutTheQuestion) {
  const auto& wins = result_->baseline_wins;
  std::size_t streaming = 0;
  for (const auto& ch : wins.choices) {
    if (ch.chosen >= 0 &&
        result_->study->manifest.methods[static_cast<std::size_t>(ch.chosen)].name ==
            "streaming_llm")
      ++streaming;
  }
  EXPECT_GT(streaming, wins.choices.size() * 8 / 10);  // the planted best baseline
  for (const auto& r : wins.comparisons.rows) {
    const std::string method = label(wins.comparisons, r, Dim::method);
    const std::string protocol = label(wins.comparisons, r, Dim::protocol);
    const double c = compression_of(wins.comparisons, r);
    // Planted Δ = p_full·0.2·c: about 0.08 at c = 0.5 (z ≈ 3), 0.12 at c = 0.75 (z ≈ 4.5).
    if (method == "keydiff" && c >= 0.5) {
      EXPECT_GT(r.result.estimate, 0) << protocol << " " << c;
    }
    if (method == "keydiff" && c >= 0.75) {
      EXPECT_TRUE(r.result.significant) << protocol << " " << c;
    }
    if (method == "snapkv" && protocol == "query-agnostic" && c <= 0.5) {
      EXPECT_LT(r.result.estimate, 0) << c;
      EXPECT_LE(r.result.p_test_less, wins.comparisons.family.per_comparison_alpha()) << c;
    }
  }
  bool counted = false;
  for (const auto& w : wins.counts) {
    if (result_->study->manifest.methods[static_cast<std::size_t>(w.method)].name != "keydiff")
      continue;
    counted = true;
    EXPECT_EQ(w.rows, 2 * 2 * 3);  // model x backend x budget
    EXPECT_GE(w.wins, 10);
  }
  EXPECT_TRUE(counted);
}

TEST_F(PlantedTruth, AccuracyIntervalsCoverThePlantedAccuracy) {
  const auto& acc = result_->accuracy;
  EXPECT_FALSE(acc.family.declared);
  EXPECT_EQ(acc.family.m, static_cast<std::int64_t>(acc.rows.size()));
  const auto& m = result_->study->manifest;
  std::size_t checked = 0;
  for (const auto& r : acc.rows) {
    ASSERT_EQ(r.interval, "clopper-pearson");
    EXPECT_EQ(r.n, 40);
    const std::size_t model = model_index(m.models[r.model].name);
    const std::string backend = manifest::kAttentionBackendNames[r.backend];
    double truth = p_full(cfg_, model, backend);
    if (r.method >= 0) {
      const auto& pm = planted(cfg_, m.methods[static_cast<std::size_t>(r.method)].name);
      truth *= 1 - lambda(pm, result_->frame->budgets[r.budget].value,
                          std::string(manifest::kProtocolNames[r.protocol]) == "query-agnostic");
    }
    EXPECT_LE(r.lower, truth);
    EXPECT_GE(r.upper, truth);
    ++checked;
  }
  EXPECT_EQ(checked, 2u * 2u * 2u * 16u * 6u);  // model backend protocol (15 + full) task
}

TEST_F(PlantedTruth, CertificationCountsAreTheGeneratorsViolations) {
  const auto& runs = result_->certification.runs;
  ASSERT_EQ(runs.size(), 4u);  // 2 blocks x 2 models
  const StudyFrame& f = *result_->frame;
  const auto& m = result_->study->manifest;
  for (const auto& run : runs) {
    ASSERT_TRUE(run.computed);
    EXPECT_FALSE(run.partial);
    const std::size_t model = model_index(m.models[run.model].name);
    const std::size_t method_index = static_cast<std::size_t>(
        std::find_if(methods_of(cfg_).begin(), methods_of(cfg_).end(),
                     [&](const PlantedMethod& p) { return p.name == run.method; }) -
        methods_of(cfg_).begin());
    // Independent count over the expansion's calibration units.
    std::map<double, std::int64_t> k;
    std::int64_t n = 0;
    for (const auto& u : result_->study->expansion.units) {
      if (u.model != run.model || u.attention_backend != AttentionBackend::sdpa ||
          u.split != manifest::Split::calibration)
        continue;
      ++n;
      std::uint32_t task = 0;
      for (std::uint32_t t = 0; t < f.tasks.size(); ++t)
        if (f.tasks[t].benchmark == u.benchmark && f.tasks[t].task_in_benchmark == u.task) task = t;
      const double full = synthetic_full_utility(cfg_, model, "sdpa", false, task, u.instance);
      for (double c : cfg_.compression) {
        const double pol = synthetic_method_utility(cfg_, model, "sdpa", false, task, u.instance,
                                                    method_index, c, true);
        k[c] += full - pol > cfg_.tau ? 1 : 0;
      }
    }
    EXPECT_EQ(run.result.n, n);
    EXPECT_EQ(n, 6 * cfg_.calibration);
    std::int64_t previous = -1;
    for (std::size_t j = 0; j < cfg_.compression.size(); ++j) {
      EXPECT_EQ(run.result.candidates[j].violations, k[cfg_.compression[j]]) << run.method;
      EXPECT_GE(run.result.candidates[j].violations, previous);  // nested violations
      previous = run.result.candidates[j].violations;
    }
    // The selection follows the fixed sequence over K*.
    const std::int64_t k_star = stats::max_certifiable_violations(n, cfg_.epsilon, cfg_.delta);
    EXPECT_EQ(run.result.k_star, k_star);
    std::optional<std::size_t> expected;
    for (std::size_t j = 0; j < run.result.candidates.size(); ++j) {
      if (run.result.candidates[j].violations > k_star) break;
      expected = j;
    }
    EXPECT_EQ(run.result.selected, expected) << run.method;
    // snapkv's planted violation rate (p_full·(0.08r + 0.25) > 0.2) is far above ε = 0.1.
    if (run.method == "snapkv") {
      EXPECT_FALSE(run.result.selected.has_value());
    }
    if (run.result.selected) {
      const double true_rate =
          p_full(cfg_, model, "sdpa") *
          lambda(planted(cfg_, run.method), cfg_.compression[*run.result.selected], true);
      EXPECT_LE(true_rate, cfg_.epsilon);
    }
  }
}

}  // namespace
}  // namespace kvaudit::reduce::testing
