// LongBench count_score (passage_count), THUDM/LongBench LongBench/metrics.py:
//   the fraction of the \d+ numbers in the prediction that equal the ground truth as strings
//   (number_match.h); 0.0 when the prediction has no number.
#pragma once

#include <string_view>

namespace kvaudit::metrics {

double longbench_count_score(std::u32string_view prediction, std::u32string_view ground_truth);

}  // namespace kvaudit::metrics
