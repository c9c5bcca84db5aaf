// Every metric against the golden scores of the official Python implementations
// (tests/golden/metrics/<metric>.json): the per-request score (score_request) and, for LongBench,
// each (prediction, ground truth) pair (score_longbench_pair) equal Python's to 1e-9; the cases
// where Python raises throw kvaudit::InputError. eval_py_samples.json checks eval.py's
// per-dataset scoring (first-line cut, max over ground truths) through score_task_request.
// Prints, per metric, the number of pairs and the largest |difference|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "suite/benchmarks/metrics/python_text.h"
#include "suite/benchmarks/metrics/score_request.h"
#include "suite/benchmarks/metrics/task_scoring.h"
#include "base/errors.h"
#include "tests/benchmarks/metrics/golden_fixture.h"

namespace kvaudit::metrics {
namespace {

using testing::load_metrics_golden;
using testing::strings_of;

constexpr double kTolerance = 1e-9;

std::vector<std::u32string> decoded(const std::vector<std::string>& texts) {
  std::vector<std::u32string> out;
  for (const auto& text : texts) out.push_back(decode_utf8_replace(text));
  return out;
}

class MetricGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(MetricGolden, EqualsOfficialPythonScores) {
  const std::string name = GetParam();
  const nlohmann::json golden = load_metrics_golden(name + ".json");
  ASSERT_EQ(golden.at("metric").get<std::string>(), name);
  const Metric metric = parse_metric(name);
  const bool ruler = metric == Metric::string_match_all || metric == Metric::string_match_part;
  std::size_t requests = 0;
  std::size_t pairs = 0;
  std::size_t errors = 0;
  std::size_t fractional = 0;
  std::size_t zeros = 0;
  std::size_t ones = 0;
  double max_delta = 0.0;
  const auto& cases = golden.at("cases");
  for (std::size_t index = 0; index < cases.size(); ++index) {
    const auto& c = cases[index];
    const std::string prediction = c.at("prediction").get<std::string>();
    const std::vector<std::string> answers = strings_of(c.at("answers"));
    const std::vector<std::string> all_classes =
        c.contains("all_classes") ? strings_of(c.at("all_classes")) : std::vector<std::string>{};
    const std::string where = name + " case " + std::to_string(index);
    if (c.contains("error")) {
      EXPECT_THROW(score_request(metric, prediction, answers, all_classes), InputError) << where;
      ++errors;
      continue;
    }
    const double want = c.at("score").get<double>();
    const double got = score_request(metric, prediction, answers, all_classes);
    const double delta = std::fabs(got - want);
    max_delta = std::max(max_delta, delta);
    EXPECT_LE(delta, kTolerance) << where << ": C++ " << got << ", Python " << want;
    ++requests;
    if (want > 0.0 && want < 1.0) ++fractional;
    if (want == 0.0) ++zeros;
    if (want == 1.0) ++ones;
    if (ruler) {
      pairs += answers.size();
      continue;
    }
    const auto per_answer = c.at("per_answer");
    ASSERT_EQ(per_answer.size(), answers.size()) << where;
    const auto prediction32 = decode_utf8_replace(prediction);
    const auto classes32 = decoded(all_classes);
    for (std::size_t k = 0; k < answers.size(); ++k) {
      const double pair_want = per_answer[k].get<double>();
      const double pair_got =
          score_longbench_pair(metric, prediction32, decode_utf8_replace(answers[k]), classes32);
      const double pair_delta = std::fabs(pair_got - pair_want);
      max_delta = std::max(max_delta, pair_delta);
      EXPECT_LE(pair_delta, kTolerance) << where << " answer " << k;
      ++pairs;
    }
  }
  std::printf(
      "%-22s requests %zu, (prediction, answer) pairs %zu, error cases %zu, "
      "scores 0 / inside (0,1) / 1: %zu / %zu / %zu, max |delta| %.3g\n",
      name.c_str(), requests, pairs, errors, zeros, fractional, ones, max_delta);
  EXPECT_GE(requests, 300u);
  if (metric == Metric::string_match_part) {  // 0 or 1 by definition: both must occur often
    EXPECT_GE(zeros, 30u);
    EXPECT_GE(ones, 30u);
  } else {
    EXPECT_GE(fractional, 30u);  // the fixture exercises partial scores, not only 0 and 1
  }
}

INSTANTIATE_TEST_SUITE_P(AllMetrics, MetricGolden,
                         ::testing::Values("string_match_all", "string_match_part", "qa_f1_score",
                                           "rouge_score", "classification_score", "retrieval_score",
                                           "retrieval_zh_score", "count_score", "code_sim_score"));

TEST(EvalPyGolden, PerDatasetScoringEqualsEvalPy) {
  const nlohmann::json golden = load_metrics_golden("eval_py_samples.json");
  std::size_t samples = 0;
  double max_delta = 0.0;
  for (const auto& c : golden.at("cases")) {
    const std::string dataset = c.at("dataset").get<std::string>();
    const double want = c.at("score").get<double>();
    const double got = score_task_request(
        benchmarks::BenchmarkKind::longbench, dataset, c.at("prediction").get<std::string>(),
        strings_of(c.at("answers")), strings_of(c.at("all_classes")));
    max_delta = std::max(max_delta, std::fabs(got - want));
    EXPECT_LE(std::fabs(got - want), kTolerance) << dataset << " sample " << samples;
    ++samples;
  }
  std::printf("eval.py samples %zu, max |delta| %.3g\n", samples, max_delta);
  EXPECT_GE(samples, 300u);
}

}  // namespace
}  // namespace kvaudit::metrics
