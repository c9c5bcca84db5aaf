// LongBench code_sim_score with fuzzywuzzy's ratio over difflib; see code_similarity.h.
#include "suite/benchmarks/metrics/code_similarity.h"

#include <cmath>

#include "suite/benchmarks/metrics/difflib_ratio.h"
#include "suite/benchmarks/metrics/python_text.h"

namespace kvaudit::metrics {

int fuzzywuzzy_ratio(std::u32string_view s1, std::u32string_view s2) {
  if (s1 == s2) return 100;
  if (s1.empty() || s2.empty()) return 0;
  // Python round(): half to even. The ratio is a non-negative double <= 100.
  const double scaled = 100 * difflib_ratio(s1, s2);
  const double floor = std::floor(scaled);
  const double diff = scaled - floor;
  double rounded = floor;
  if (diff > 0.5 || (diff == 0.5 && std::fmod(floor, 2.0) != 0.0)) rounded = floor + 1.0;
  return static_cast<int>(rounded);
}

double longbench_code_sim_score(std::u32string_view prediction, std::u32string_view ground_truth) {
  std::u32string_view line;
  const auto lines = python_split_char(python_lstrip_char(prediction, U'\n'), U'\n');
  for (const auto& candidate : lines) {
    const std::u32string_view view = candidate;
    if (view.find(U'`') == std::u32string_view::npos &&
        view.find(U'#') == std::u32string_view::npos &&
        view.find(U"//") == std::u32string_view::npos) {
      line = view;
      break;
    }
  }
  return fuzzywuzzy_ratio(line, ground_truth) / 100.0;
}

}  // namespace kvaudit::metrics
