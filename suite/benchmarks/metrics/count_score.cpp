// LongBench count_score; see count_score.h.
#include "suite/benchmarks/metrics/count_score.h"

#include "suite/benchmarks/metrics/number_match.h"

namespace kvaudit::metrics {

double longbench_count_score(std::u32string_view prediction, std::u32string_view ground_truth) {
  return fraction_of_numbers_equal(prediction, ground_truth);
}

}  // namespace kvaudit::metrics
