// RULER's scorers (NVIDIA/RULER scripts/eval/synthetic/constants.py and
// scripts/eval/evaluate.py), one prediction at a time. The official functions score a whole task:
//   string_match_part(preds, refs) = round(sum(max([1.0 if r.lower() in pred.lower() else 0.0
//                                     for r in ref]) ...) / len(preds) * 100, 2)
//   string_match_all(preds, refs)  = round(sum(sum([1.0 if r.lower() in pred.lower() else 0.0
//                                     for r in ref]) / len(ref) ...) / len(preds) * 100, 2)
// and every prediction first goes through evaluate.py's postprocess_pred:
//   pred.strip(), then re.sub(r'[\x00-\x1f]', '\n', .), then .strip().
// The suite keeps the per-prediction term in [0, 1] (task score = 100 * mean, rounded by the
// reducer). Only case is normalised (Python str.lower(), Unicode-aware: "İ" lowers to "i\u0307",
// final sigma), a reference is a plain substring test; an empty reference matches always.
// Quirks kept: control characters in a reference are NOT replaced (only the prediction's), so a
// reference containing a tab never matches; an empty reference list raises in Python
// (max() of nothing / division by zero) and throws kvaudit::InputError here.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace kvaudit::metrics {

// postprocess_pred(predict_str) on code points.
std::u32string ruler_postprocess_prediction(std::u32string_view prediction);

// The per-prediction terms, on a prediction that has already been post-processed.
double ruler_string_match_all(std::u32string_view processed_prediction,
                              std::span<const std::u32string> references);
double ruler_string_match_part(std::u32string_view processed_prediction,
                               std::span<const std::u32string> references);

}  // namespace kvaudit::metrics
