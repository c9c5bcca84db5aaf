// Task -> metric and eval.py's per-dataset preprocessing; see task_scoring.h.
#include "suite/benchmarks/metrics/task_scoring.h"

#include "suite/benchmarks/metrics/score_request.h"
#include "base/errors.h"

namespace kvaudit::metrics {

Metric metric_of_task(benchmarks::BenchmarkKind kind, std::string_view task) {
  const benchmarks::TaskSpec* spec = benchmarks::find_task(kind, task);
  if (spec == nullptr) {
    throw InputError("unknown " + std::string(benchmarks::kind_name(kind)) + " task '" +
                     std::string(task) + "' (known: " + benchmarks::task_name_list(kind) + ")");
  }
  if (kind == benchmarks::BenchmarkKind::ruler) {
    return spec->family == "qa" ? Metric::string_match_part : Metric::string_match_all;
  }
  try {
    return parse_metric(spec->family);
  } catch (const InputError& error) {
    throw InputError("LongBench task '" + std::string(task) + "': " + error.what());
  }
}

bool longbench_keeps_first_line_only(std::string_view dataset) {
  return dataset == "trec" || dataset == "triviaqa" || dataset == "samsum" || dataset == "lsht";
}

std::string_view first_line_after_leading_newlines(std::string_view prediction) {
  const std::size_t begin = prediction.find_first_not_of('\n');
  if (begin == std::string_view::npos) return {};
  const std::string_view rest = prediction.substr(begin);
  return rest.substr(0, rest.find('\n'));
}

double score_task_request(benchmarks::BenchmarkKind kind, std::string_view task,
                          std::string_view prediction, std::span<const std::string> answers,
                          std::span<const std::string> all_classes) {
  const Metric metric = metric_of_task(kind, task);
  const bool first_line =
      kind == benchmarks::BenchmarkKind::longbench && longbench_keeps_first_line_only(task);
  return score_request(metric,
                       first_line ? first_line_after_leading_newlines(prediction) : prediction,
                       answers, all_classes);
}

}  // namespace kvaudit::metrics
