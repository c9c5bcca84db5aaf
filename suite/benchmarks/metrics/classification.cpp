// LongBench classification_score with its list-mutation quirk; see classification.h.
#include "suite/benchmarks/metrics/classification.h"

#include <algorithm>
#include <vector>

namespace kvaudit::metrics {

double longbench_classification_score(std::u32string_view prediction,
                                      std::u32string_view ground_truth,
                                      std::span<const std::u32string> all_classes) {
  std::vector<std::u32string_view> matches;
  for (const auto& class_name : all_classes) {
    if (prediction.find(class_name) != std::u32string_view::npos) matches.push_back(class_name);
  }
  // Python's list iterator: an index compared with the current length at every step.
  for (std::size_t index = 0; index < matches.size(); ++index) {
    const std::u32string_view match_term = matches[index];
    if (ground_truth.find(match_term) != std::u32string_view::npos && match_term != ground_truth) {
      matches.erase(std::find(matches.begin(), matches.end(), match_term));  // list.remove
    }
  }
  if (std::find(matches.begin(), matches.end(), ground_truth) == matches.end()) return 0.0;
  return 1.0 / static_cast<double>(matches.size());
}

}  // namespace kvaudit::metrics
