// The fixed-sequence certification procedure on hand-built calibration data: certification up to
// the first failure, the full-KV fallback, the plug-in contrast, the test-split evaluation with
// per-task Bonferroni Clopper–Pearson intervals, the lock check and input validation;
// certify_counts (the same decision from the counts alone) against certify and at n = 1e10 and
// 2^53.
#include "statistics/certification.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "base/errors.h"
#include "statistics/binomial.h"

namespace kvaudit::stats {
namespace {

// n indicators with the first k set.
std::vector<std::uint8_t> with_violations(std::size_t n, std::size_t k) {
  std::vector<std::uint8_t> v(n, 0);
  for (std::size_t i = 0; i < k; ++i) v[i] = 1;
  return v;
}

CertificationInput seed_like_input(const std::vector<std::size_t>& violations) {
  CertificationInput input;
  input.name = "ruler/snapkv";
  input.contract = {0.0, 0.05, 0.05};
  const char* ids[] = {"snapkv@0.9", "snapkv@0.75", "snapkv@0.5", "snapkv@0.25", "snapkv@0.1"};
  for (std::size_t j = 0; j < violations.size(); ++j) {
    input.candidates.push_back({ids[j], with_violations(1200, violations[j]), {}});
  }
  return input;
}

TEST(Certification, CertifiesUpToTheFirstFailureAndSelectsTheLastCertified) {
  // K* = 47 at n = 1200: 10, 30, 47 certify, 48 fails, and 5 after it is never certified.
  const CertificationResult r = certify(seed_like_input({10, 30, 47, 48, 5}));
  EXPECT_EQ(r.n, 1200);
  EXPECT_EQ(r.k_star, 47);
  EXPECT_EQ(r.violation_cap, 60);
  ASSERT_EQ(r.candidates.size(), 5u);
  EXPECT_TRUE(r.candidates[0].certified);
  EXPECT_TRUE(r.candidates[1].certified);
  EXPECT_TRUE(r.candidates[2].certified);
  EXPECT_FALSE(r.candidates[3].certified);
  EXPECT_TRUE(r.candidates[3].tested);
  EXPECT_FALSE(r.candidates[4].certified);
  EXPECT_FALSE(r.candidates[4].tested) << "fixed sequence stops at the first failure";
  EXPECT_LE(r.candidates[4].p_value, 0.05) << "its p-value is still reported";
  EXPECT_EQ(r.stop_index, 3u);
  ASSERT_TRUE(r.selected.has_value());
  EXPECT_EQ(*r.selected, 2u);
  EXPECT_EQ(r.selected_policy, "snapkv@0.5");
  for (const auto& c : r.candidates) {
    EXPECT_DOUBLE_EQ(c.p_value, ltt_p_value(1200, 0.05, c.violations));
    EXPECT_DOUBLE_EQ(c.empirical_risk, static_cast<double>(c.violations) / 1200);
  }
  // Plug-in: the most aggressive candidate with K/n ≤ ε (K ≤ 60): the last one (K = 5).
  ASSERT_TRUE(r.plug_in.has_value());
  EXPECT_EQ(*r.plug_in, 4u);
  EXPECT_EQ(r.plug_in_policy, "snapkv@0.1");
  EXPECT_FALSE(r.selected_test.has_value()) << "no test split given";
}

TEST(Certification, FallsBackToFullKvWhenTheFirstCandidateFails) {
  const CertificationResult r = certify(seed_like_input({48, 0, 0}));
  EXPECT_FALSE(r.selected.has_value());
  EXPECT_EQ(r.selected_policy, kFullKvPolicy);
  EXPECT_EQ(r.stop_index, 0u);
  EXPECT_FALSE(r.candidates[1].tested);
}

TEST(Certification, AllCertifiedMeansStopIndexIsTheCandidateCount) {
  const CertificationResult r = certify(seed_like_input({0, 1, 2}));
  EXPECT_EQ(r.stop_index, 3u);
  EXPECT_EQ(*r.selected, 2u);
}

TEST(Certification, PlugInFallsBackToFullKvWhenEveryCandidateExceedsEpsilon) {
  const CertificationResult r = certify(seed_like_input({61, 70}));
  EXPECT_FALSE(r.plug_in.has_value());
  EXPECT_EQ(r.plug_in_policy, kFullKvPolicy);
  // K = 60 is exactly nε: the plug-in accepts it (≤), the certificate does not.
  const CertificationResult edge = certify(seed_like_input({60}));
  EXPECT_EQ(edge.plug_in_policy, "snapkv@0.9");
  EXPECT_EQ(edge.selected_policy, kFullKvPolicy);
}

TEST(Certification, ViolationsFromUtilitiesUseStrictExcessOverTau) {
  const std::vector<double> full = {1.0, 1.0, 0.5, 0.8, 0.0};
  const std::vector<double> cand = {1.0, 0.0, 0.4, 0.5, 0.0};
  EXPECT_EQ(violations_from_utilities(full, cand, 0.0, "x"),
            (std::vector<std::uint8_t>{0, 1, 1, 1, 0}));
  EXPECT_EQ(violations_from_utilities(full, cand, 0.25, "x"),
            (std::vector<std::uint8_t>{0, 1, 0, 1, 0}));
  EXPECT_THROW(violations_from_utilities(full, {1.0}, 0.0, "x"), InputError);
  EXPECT_THROW(violations_from_utilities(full, cand, -0.1, "x"), InputError);
  EXPECT_THROW(violations_from_utilities({std::nan("")}, {1.0}, 0.0, "x"), InputError);
}

TEST(Certification, TestSplitEvaluationWithBonferroniPerTask) {
  CertificationInput input = seed_like_input({10, 80});
  // Test split: 3 tasks × 100 requests. Candidate 0 violates 2, 3 and 30 times.
  const std::vector<std::string> tasks = {"niah_single", "qa_1", "vt"};
  for (const auto& task : tasks) {
    for (int i = 0; i < 100; ++i) input.test_tasks.push_back(task);
  }
  auto& test0 = input.candidates[0].test_violations;
  test0.assign(300, 0);
  for (int i = 0; i < 2; ++i) test0[static_cast<std::size_t>(i)] = 1;
  for (int i = 0; i < 3; ++i) test0[static_cast<std::size_t>(100 + i)] = 1;
  for (int i = 0; i < 30; ++i) test0[static_cast<std::size_t>(200 + i)] = 1;
  input.candidates[1].test_violations.assign(300, 1);
  input.task_alpha = 0.05;

  const CertificationResult r = certify(input);
  EXPECT_EQ(r.selected_policy, "snapkv@0.9");
  ASSERT_TRUE(r.selected_test.has_value());
  const TestEvaluation& t = *r.selected_test;
  EXPECT_EQ(t.policy, "snapkv@0.9");
  EXPECT_EQ(t.requests, 300);
  EXPECT_EQ(t.violations, 35);
  EXPECT_DOUBLE_EQ(t.empirical_risk, 35.0 / 300);
  ASSERT_EQ(t.per_task.size(), 3u);
  EXPECT_EQ(t.per_task[2].task, "vt");
  EXPECT_EQ(t.per_task[2].violations, 30);
  EXPECT_EQ(t.per_task[2].interval.m, 3);
  EXPECT_EQ(t.per_task[2].interval.family, "certification_task_risk");
  const auto expected = clopper_pearson_interval(30, 100, 0.05, {"certification_task_risk", 3});
  EXPECT_EQ(t.per_task[2].interval.lower, expected.lower);
  EXPECT_TRUE(t.per_task[2].lower_bound_exceeds_epsilon);
  EXPECT_FALSE(t.per_task[0].lower_bound_exceeds_epsilon);
  EXPECT_FALSE(t.per_task[1].lower_bound_exceeds_epsilon);
  EXPECT_EQ(t.tasks_flagged, 1);

  // The plug-in choice (K = 80 > 60: not eligible) is candidate 0 as well.
  ASSERT_TRUE(r.plug_in_test.has_value());
  EXPECT_EQ(r.plug_in_test->policy, "snapkv@0.9");
}

TEST(Certification, FullKvFallbackHasZeroTestRisk) {
  CertificationInput input = seed_like_input({100});
  input.test_tasks = {"a", "a", "b"};
  input.candidates[0].test_violations = {1, 1, 1};
  const CertificationResult r = certify(input);
  ASSERT_TRUE(r.selected_test.has_value());
  EXPECT_TRUE(r.selected_test->full_kv);
  EXPECT_EQ(r.selected_test->violations, 0);
  EXPECT_EQ(r.selected_test->per_task.size(), 2u);
  EXPECT_EQ(r.selected_test->per_task[0].interval.lower, 0.0);
}

TEST(Certification, RejectsBadInput) {
  EXPECT_THROW(certify(seed_like_input({})), InputError);
  CertificationInput bad_contract = seed_like_input({1});
  bad_contract.contract.epsilon = 0;
  EXPECT_THROW(certify(bad_contract), InputError);
  CertificationInput ragged = seed_like_input({1, 2});
  ragged.candidates[1].calibration_violations.pop_back();
  EXPECT_THROW(certify(ragged), InputError);
  CertificationInput not_binary = seed_like_input({1});
  not_binary.candidates[0].calibration_violations[5] = 2;
  try {
    certify(not_binary);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ruler/snapkv: candidate 'snapkv@0.9' calibration: "
                                         "violation indicator 5 is 2"),
              std::string::npos)
        << e.what();
  }
  CertificationInput test_mismatch = seed_like_input({1});
  test_mismatch.test_tasks = {"a"};
  EXPECT_THROW(certify(test_mismatch), InputError);
  CertificationInput empty = seed_like_input({1});
  empty.candidates[0].calibration_violations.clear();
  EXPECT_THROW(certify(empty), InputError);
}

TEST(CertifyCounts, DecidesExactlyAsCertifyOnIndicators) {
  for (const std::vector<std::size_t>& ks : std::vector<std::vector<std::size_t>>{
           {10, 30, 47, 48, 5}, {48, 0, 0}, {0, 1, 2}, {61, 70}, {60}, {47, 60, 61}}) {
    const CertificationResult full = certify(seed_like_input(ks));
    std::vector<CalibrationCount> counts;
    for (const auto& c : seed_like_input(ks).candidates) {
      counts.push_back({c.id, static_cast<std::int64_t>(std::count(c.calibration_violations.begin(),
                                                                   c.calibration_violations.end(),
                                                                   std::uint8_t{1}))});
    }
    const CertificationResult r = certify_counts("ruler/snapkv", {0.0, 0.05, 0.05}, 1200, counts);
    EXPECT_EQ(r.n, full.n);
    EXPECT_EQ(r.violation_cap, full.violation_cap);
    EXPECT_EQ(r.k_star, full.k_star);
    EXPECT_EQ(r.stop_index, full.stop_index);
    EXPECT_EQ(r.selected, full.selected);
    EXPECT_EQ(r.selected_policy, full.selected_policy);
    EXPECT_EQ(r.plug_in, full.plug_in);
    EXPECT_EQ(r.plug_in_policy, full.plug_in_policy);
    ASSERT_EQ(r.candidates.size(), full.candidates.size());
    for (std::size_t j = 0; j < r.candidates.size(); ++j) {
      EXPECT_EQ(r.candidates[j].id, full.candidates[j].id);
      EXPECT_EQ(r.candidates[j].violations, full.candidates[j].violations);
      EXPECT_EQ(r.candidates[j].empirical_risk, full.candidates[j].empirical_risk);
      EXPECT_EQ(r.candidates[j].p_value, full.candidates[j].p_value);
      EXPECT_EQ(r.candidates[j].tested, full.candidates[j].tested);
      EXPECT_EQ(r.candidates[j].certified, full.candidates[j].certified);
    }
    EXPECT_FALSE(r.selected_test.has_value());
    EXPECT_FALSE(r.plug_in_test.has_value());
  }
}

TEST(CertifyCounts, NeedsNoIndicatorsForHugeN) {
  // n = 1e10 took 10 GB of indicators through certify() (the CLI's bad_alloc, issue 16).
  const std::int64_t n = 10'000'000'000;
  const std::int64_t k_star = max_certifiable_violations(n, 0.05, 0.05);
  const auto r = certify_counts("huge", {0.0, 0.05, 0.05}, n,
                                {{"a", 0}, {"b", k_star}, {"c", k_star + 1}, {"d", 0}});
  EXPECT_EQ(r.k_star, k_star);
  EXPECT_EQ(r.selected, std::optional<std::size_t>(1));
  EXPECT_EQ(r.stop_index, 2u);
  EXPECT_TRUE(r.candidates[1].certified);
  EXPECT_FALSE(r.candidates[2].certified);
  EXPECT_FALSE(r.candidates[3].tested);
  EXPECT_EQ(r.plug_in, std::optional<std::size_t>(3));
  const auto top = certify_counts("top", {0.0, 0.5, 0.05}, kMaxTrials, {{"a", 0}});
  EXPECT_EQ(top.selected, std::optional<std::size_t>(0));
}

TEST(CertifyCounts, RejectsBadInput) {
  const Contract c{0.0, 0.05, 0.05};
  EXPECT_THROW(certify_counts("x", c, 100, {}), InputError);
  EXPECT_THROW(certify_counts("x", c, 0, {{"a", 0}}), InputError);
  EXPECT_THROW(certify_counts("x", c, kMaxTrials + 1, {{"a", 0}}), InputError);
  EXPECT_THROW(certify_counts("x", c, 100, {{"a", 101}}), InputError);
  EXPECT_THROW(certify_counts("x", c, 100, {{"a", -1}}), InputError);
  EXPECT_THROW(certify_counts("x", {0.0, 1.0, 0.05}, 100, {{"a", 0}}), InputError);
  try {
    certify_counts("kvaudit stats certify", c, 100, {{"a", 3}, {"candidate 2", 200}});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("kvaudit stats certify: candidate 'candidate 2' has 200 "
                                         "violations, outside [0, n = 100]"),
              std::string::npos)
        << e.what();
  }
}

TEST(Certification, RefusesAContractOrOrderThatDiffersFromTheLock) {
  const Contract locked{0.0, 0.05, 0.05};
  EXPECT_NO_THROW(require_matches_lock(locked, locked, {"a", "b"}, {"a", "b"}, "prereg.json"));
  try {
    require_matches_lock({0.0, 0.1, 0.05}, locked, {"a", "b"}, {"a", "b"}, "results/prereg.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("results/prereg.json: refusing to certify: contract "
                                         "epsilon is 0.10000000000000001 but the "
                                         "preregistration lock says 0.050000000000000003"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(require_matches_lock({0.1, 0.05, 0.05}, locked, {}, {}, "x"), InputError);
  EXPECT_THROW(require_matches_lock(locked, {0.0, 0.05, 0.01}, {}, {}, "x"), InputError);
  EXPECT_THROW(require_matches_lock(locked, locked, {"b", "a"}, {"a", "b"}, "x"), InputError);
  EXPECT_THROW(require_matches_lock(locked, locked, {"a"}, {"a", "b"}, "x"), InputError);
}

}  // namespace
}  // namespace kvaudit::stats
