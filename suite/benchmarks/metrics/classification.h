// LongBench classification_score (THUDM/LongBench LongBench/metrics.py), used by trec (and lsht):
//   em_match_list = [c for c in all_classes if c in prediction]        (case-sensitive substring)
//   for match_term in em_match_list:                                    (iterating the list...)
//       if match_term in ground_truth and match_term != ground_truth:
//           em_match_list.remove(match_term)                            (...while removing from it)
//   score = 1.0 / len(em_match_list) if ground_truth in em_match_list else 0.0
// Quirks reproduced exactly:
//  * remove-while-iterating: the list iterator is an index; after a removal the element that
//    slides into the current slot is skipped, so a second class that should be removed may stay;
//  * list.remove deletes the FIRST equal element, which may lie before the iterator when
//    all_classes has duplicates;
//  * upstream's difflib fallback sits behind `if em_match_list != 0`, which is always true for a
//    list, so it never runs (an empty list scores 0.0).
// Substring tests on valid UTF-8 code points equal substring tests on code-point strings.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace kvaudit::metrics {

double longbench_classification_score(std::u32string_view prediction,
                                      std::u32string_view ground_truth,
                                      std::span<const std::u32string> all_classes);

}  // namespace kvaudit::metrics
