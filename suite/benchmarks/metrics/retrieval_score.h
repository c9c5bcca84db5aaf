// LongBench retrieval_score (passage_retrieval_en) and retrieval_zh_score (passage_retrieval_zh),
// THUDM/LongBench LongBench/metrics.py:
//   ground_truth_id = re.findall(r'Paragraph (\d+)', ground_truth)[0]   (zh: r'段落(\d+)')
//   score = the fraction of the prediction's \d+ numbers equal to that id (number_match.h).
// The pattern needs exactly one ASCII space in "Paragraph N" and is case-sensitive; \d is
// Unicode. A ground truth without the pattern makes upstream raise IndexError (eval.py stops);
// here it throws kvaudit::InputError naming the ground truth.
// retrieval_zh needs no word segmentation (no jieba), so it is supported.
#pragma once

#include <string_view>

namespace kvaudit::metrics {

double longbench_retrieval_score(std::u32string_view prediction, std::u32string_view ground_truth);
double longbench_retrieval_zh_score(std::u32string_view prediction,
                                    std::u32string_view ground_truth);

}  // namespace kvaudit::metrics
