// The names of the benchmark metrics the suite scores with, as the task catalogue
// (suite/benchmarks/task_catalog.h) and the official sources spell them: RULER's
// string_match_all / string_match_part (scripts/eval/synthetic/constants.py) and LongBench's
// metric functions (LongBench/metrics.py). LongBench's qa_f1_zh_score and rouge_zh_score segment
// Chinese text with jieba (a dictionary-driven HMM segmenter with no C++ equivalent that
// reproduces its output), so they are rejected with an error that says so.
#pragma once

#include <string_view>

namespace kvaudit::metrics {

enum class Metric {
  string_match_all,
  string_match_part,
  qa_f1_score,
  rouge_score,
  classification_score,
  retrieval_score,
  retrieval_zh_score,
  count_score,
  code_sim_score,
};

std::string_view metric_name(Metric metric);
// Throws kvaudit::InputError for an unknown name (listing the known ones) and for the jieba-based
// Chinese metrics (saying why).
Metric parse_metric(std::string_view name);
// "string_match_all, string_match_part, ...": for error messages.
std::string_view metric_name_list();

}  // namespace kvaudit::metrics
