// LongBench code_sim_score (lcc, repobench-p), THUDM/LongBench LongBench/metrics.py:
//   lines = prediction.lstrip('\n').split('\n')
//   line  = the first line containing none of '`', '#', '//' (else "")
//   score = fuzz.ratio(line, ground_truth) / 100
// with fuzzywuzzy 0.18.0's fuzz.ratio(s1, s2) (fuzzywuzzy/fuzz.py, utils.py): decorators in the
// order check_for_none, check_for_equivalence (s1 == s2 -> 100, so two empty strings give 100),
// check_empty_string (either empty -> 0), then utils.intr(100 * SequenceMatcher(None, s1,
// s2).ratio()) = int(round(.)), Python's round-half-to-even on the double.
// SequenceMatcher: fuzzywuzzy imports python-Levenshtein's StringMatcher when installed and falls
// back to difflib.SequenceMatcher (with a warning) when not. LongBench's requirements.txt does not
// list python-Levenshtein, so the official setting - and the golden fixtures
// (tools/golden/make_metrics_golden.py, which refuses to run with Levenshtein importable) - use
// difflib (difflib_ratio.h), including its autojunk heuristic for ground truths of >= 200 code
// points. (With Levenshtein the ratio would be the indel similarity, sometimes a point apart.)
#pragma once

#include <string_view>

namespace kvaudit::metrics {

// fuzz.ratio(s1, s2) as an integer 0..100.
int fuzzywuzzy_ratio(std::u32string_view s1, std::u32string_view s2);
double longbench_code_sim_score(std::u32string_view prediction, std::u32string_view ground_truth);

}  // namespace kvaudit::metrics
