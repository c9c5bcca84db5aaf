// Metric names; see metric.h.
#include "suite/benchmarks/metrics/metric.h"

#include <array>
#include <string>
#include <utility>

#include "base/errors.h"

namespace kvaudit::metrics {
namespace {

constexpr std::array<std::pair<Metric, std::string_view>, 9> kNames{{
    {Metric::string_match_all, "string_match_all"},
    {Metric::string_match_part, "string_match_part"},
    {Metric::qa_f1_score, "qa_f1_score"},
    {Metric::rouge_score, "rouge_score"},
    {Metric::classification_score, "classification_score"},
    {Metric::retrieval_score, "retrieval_score"},
    {Metric::retrieval_zh_score, "retrieval_zh_score"},
    {Metric::count_score, "count_score"},
    {Metric::code_sim_score, "code_sim_score"},
}};

}  // namespace

std::string_view metric_name(Metric metric) {
  for (const auto& [value, name] : kNames) {
    if (value == metric) return name;
  }
  throw InternalError("metric_name: unknown Metric value");
}

std::string_view metric_name_list() {
  return "string_match_all, string_match_part, qa_f1_score, rouge_score, classification_score, "
         "retrieval_score, retrieval_zh_score, count_score, code_sim_score";
}

Metric parse_metric(std::string_view name) {
  for (const auto& [value, metric] : kNames) {
    if (metric == name) return value;
  }
  if (name == "qa_f1_zh_score" || name == "rouge_zh_score") {
    throw InputError("metric '" + std::string(name) +
                     "' is not supported: LongBench computes it on jieba word segmentation, "
                     "which has no C++ equivalent that reproduces jieba's output (the Chinese "
                     "tasks multifieldqa_zh, dureader and vcsum are outside the English default "
                     "set)");
  }
  throw InputError("unknown metric '" + std::string(name) +
                   "' (known: " + std::string(metric_name_list()) + ")");
}

}  // namespace kvaudit::metrics
