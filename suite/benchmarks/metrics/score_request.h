// One request's score in [0, 1], as the official evaluation scripts compute its term:
//  * RULER (string_match_all / string_match_part): evaluate.py's postprocess_pred on the
//    prediction, then the per-prediction term of constants.py (ruler_string_match.h); the
//    answers are RULER's `outputs`; an empty list throws kvaudit::InputError.
//  * LongBench: eval.py's `score = 0.; for ground_truth in ground_truths: score = max(score,
//    metric(prediction, ground_truth, all_classes=all_classes))` (an empty list scores 0.0, as
//    in Python). all_classes is used by classification_score only. The per-dataset first-line
//    cut (trec, triviaqa, samsum, lsht) belongs to the dataset, not the metric: see
//    task_scoring.h.
// Text arrives as UTF-8 bytes; invalid UTF-8 is decoded as Python's
// bytes.decode("utf-8", "replace") (python_text.h), never an error.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "suite/benchmarks/metrics/metric.h"

namespace kvaudit::metrics {

double score_request(Metric metric, std::string_view prediction,
                     std::span<const std::string> answers,
                     std::span<const std::string> all_classes = {});
// By name (parse_metric's errors).
double score_request(std::string_view metric, std::string_view prediction,
                     std::span<const std::string> answers,
                     std::span<const std::string> all_classes = {});

// One LongBench metric on one (prediction, ground truth) pair: metrics.py's function itself.
double score_longbench_pair(Metric metric, std::u32string_view prediction,
                            std::u32string_view ground_truth,
                            std::span<const std::u32string> all_classes = {});

}  // namespace kvaudit::metrics
