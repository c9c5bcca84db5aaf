// Per-request scoring by metric; see score_request.h.
#include "suite/benchmarks/metrics/score_request.h"

#include <algorithm>
#include <vector>

#include "suite/benchmarks/metrics/classification.h"
#include "suite/benchmarks/metrics/code_similarity.h"
#include "suite/benchmarks/metrics/count_score.h"
#include "suite/benchmarks/metrics/python_text.h"
#include "suite/benchmarks/metrics/qa_f1.h"
#include "suite/benchmarks/metrics/retrieval_score.h"
#include "suite/benchmarks/metrics/rouge_l.h"
#include "suite/benchmarks/metrics/ruler_string_match.h"
#include "base/errors.h"

namespace kvaudit::metrics {
namespace {

std::vector<std::u32string> decode_all(std::span<const std::string> texts) {
  std::vector<std::u32string> out;
  out.reserve(texts.size());
  for (const auto& text : texts) out.push_back(decode_utf8_replace(text));
  return out;
}

}  // namespace

double score_longbench_pair(Metric metric, std::u32string_view prediction,
                            std::u32string_view ground_truth,
                            std::span<const std::u32string> all_classes) {
  switch (metric) {
    case Metric::qa_f1_score:
      return longbench_qa_f1_score(prediction, ground_truth);
    case Metric::rouge_score:
      return longbench_rouge_score(prediction, ground_truth);
    case Metric::classification_score:
      return longbench_classification_score(prediction, ground_truth, all_classes);
    case Metric::retrieval_score:
      return longbench_retrieval_score(prediction, ground_truth);
    case Metric::retrieval_zh_score:
      return longbench_retrieval_zh_score(prediction, ground_truth);
    case Metric::count_score:
      return longbench_count_score(prediction, ground_truth);
    case Metric::code_sim_score:
      return longbench_code_sim_score(prediction, ground_truth);
    case Metric::string_match_all:
    case Metric::string_match_part:
      break;
  }
  throw InternalError("score_longbench_pair: " + std::string(metric_name(metric)) +
                      " is not a LongBench metric");
}

double score_request(Metric metric, std::string_view prediction,
                     std::span<const std::string> answers,
                     std::span<const std::string> all_classes) {
  const std::u32string decoded_prediction = decode_utf8_replace(prediction);
  const std::vector<std::u32string> decoded_answers = decode_all(answers);
  if (metric == Metric::string_match_all || metric == Metric::string_match_part) {
    const std::u32string processed = ruler_postprocess_prediction(decoded_prediction);
    return metric == Metric::string_match_all ? ruler_string_match_all(processed, decoded_answers)
                                              : ruler_string_match_part(processed, decoded_answers);
  }
  const std::vector<std::u32string> decoded_classes = decode_all(all_classes);
  double score = 0.0;
  for (const auto& ground_truth : decoded_answers) {
    score = std::max(
        score, score_longbench_pair(metric, decoded_prediction, ground_truth, decoded_classes));
  }
  return score;
}

double score_request(std::string_view metric, std::string_view prediction,
                     std::span<const std::string> answers,
                     std::span<const std::string> all_classes) {
  return score_request(parse_metric(metric), prediction, answers, all_classes);
}

}  // namespace kvaudit::metrics
