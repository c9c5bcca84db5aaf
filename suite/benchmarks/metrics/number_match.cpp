// \d+ runs and the count/retrieval fraction; see number_match.h.
#include "suite/benchmarks/metrics/number_match.h"

#include "suite/benchmarks/metrics/python_text.h"

namespace kvaudit::metrics {

std::vector<std::u32string> python_decimal_runs(std::u32string_view text) {
  std::vector<std::u32string> runs;
  std::size_t i = 0;
  while (i < text.size()) {
    if (!python_re_decimal(text[i])) {
      ++i;
      continue;
    }
    const std::size_t start = i;
    while (i < text.size() && python_re_decimal(text[i])) ++i;
    runs.emplace_back(text.substr(start, i - start));
  }
  return runs;
}

double fraction_of_numbers_equal(std::u32string_view prediction, std::u32string_view target) {
  const auto numbers = python_decimal_runs(prediction);
  if (numbers.empty()) return 0.0;
  long right = 0;
  for (const auto& number : numbers) {
    if (number == target) ++right;
  }
  return static_cast<double>(right) / static_cast<double>(numbers.size());
}

}  // namespace kvaudit::metrics
