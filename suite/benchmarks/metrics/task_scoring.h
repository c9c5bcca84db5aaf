// Scoring a request of a catalogued task (suite/benchmarks/task_catalog.h):
//  * RULER: family "qa" (qa_1, qa_2) uses string_match_part, every other family
//    string_match_all (RULER scripts/eval/synthetic/constants.py TASKS);
//  * LongBench: the catalogue's family is eval.py's dataset2metric entry; before scoring trec,
//    triviaqa, samsum and lsht, eval.py keeps only the prediction's first line:
//    prediction.lstrip('\n').split('\n')[0].
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "suite/benchmarks/metrics/metric.h"
#include "suite/benchmarks/task_catalog.h"

namespace kvaudit::metrics {

// Throws kvaudit::InputError for a task the catalogue does not know (listing the known ones) and
// for the jieba-based Chinese tasks.
Metric metric_of_task(benchmarks::BenchmarkKind kind, std::string_view task);
// eval.py's first-line datasets.
bool longbench_keeps_first_line_only(std::string_view dataset);
// prediction.lstrip('\n').split('\n')[0] on UTF-8 bytes ('\n' never occurs inside a multi-byte
// sequence, so the cut is the same on bytes and on code points).
std::string_view first_line_after_leading_newlines(std::string_view prediction);

// score_request(metric_of_task(kind, task), prediction', answers, all_classes) where prediction'
// is the first line for eval.py's first-line datasets and the prediction otherwise.
double score_task_request(benchmarks::BenchmarkKind kind, std::string_view task,
                          std::string_view prediction, std::span<const std::string> answers,
                          std::span<const std::string> all_classes = {});

}  // namespace kvaudit::metrics
