// LongBench retrieval_score / retrieval_zh_score; see retrieval_score.h.
#include "suite/benchmarks/metrics/retrieval_score.h"

#include <string>

#include "suite/benchmarks/metrics/number_match.h"
#include "suite/benchmarks/metrics/python_text.h"
#include "base/errors.h"

namespace kvaudit::metrics {
namespace {

// re.findall(label + r"(\d+)", ground_truth)[0].
std::u32string first_labelled_id(std::u32string_view ground_truth, std::u32string_view label,
                                 const char* metric) {
  std::size_t from = 0;
  while (true) {
    const std::size_t at = ground_truth.find(label, from);
    if (at == std::u32string_view::npos) break;
    std::size_t end = at + label.size();
    while (end < ground_truth.size() && python_re_decimal(ground_truth[end])) ++end;
    if (end > at + label.size()) {
      return std::u32string(ground_truth.substr(at + label.size(), end - at - label.size()));
    }
    from = at + 1;
  }
  throw InputError(std::string("LongBench ") + metric + ": the ground truth \"" +
                   encode_utf8(ground_truth) + "\" contains no \"" + encode_utf8(label) +
                   "<digits>\" (the official scorer fails with IndexError)");
}

}  // namespace

double longbench_retrieval_score(std::u32string_view prediction, std::u32string_view ground_truth) {
  return fraction_of_numbers_equal(
      prediction, first_labelled_id(ground_truth, U"Paragraph ", "retrieval_score"));
}

double longbench_retrieval_zh_score(std::u32string_view prediction,
                                    std::u32string_view ground_truth) {
  return fraction_of_numbers_equal(
      prediction, first_labelled_id(ground_truth, U"\u6BB5\u843D", "retrieval_zh_score"));
}

}  // namespace kvaudit::metrics
