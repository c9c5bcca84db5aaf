// LongBench rouge_score (THUDM/LongBench LongBench/metrics.py), used by gov_report, qmsum,
// multi_news and samsum:
//   try: Rouge().get_scores([pred], [gt], avg=True)["rouge-l"]["f"]  except: 0.0
// with the PyPI package rouge==1.0.1 (pltrdy/rouge, rouge/rouge.py + rouge/rouge_score.py):
//  * sentences = [" ".join(s.split()) for s in text.split(".") if len(s) > 0]: split on "." only;
//    the length test comes BEFORE the whitespace collapse, so a whitespace-only piece becomes the
//    sentence "" whose only word is the empty string;
//  * words = sentence.split(" "); no lowercasing, stemming or punctuation removal;
//  * exclusive=True (set semantics): m = number of distinct reference words, n = number of
//    distinct hypothesis words;
//  * for every reference sentence and every hypothesis sentence the LCS table is built and one
//    LCS is read back by the recursive _recon(i, j): on equal words go diagonally, else up
//    (i-1) if table[i-1][j] > table[i][j-1] else left (j-1); the words of all these LCSs are
//    united as a set, llcs = its size;
//  * R = llcs/m, P = llcs/n, F = 2.0 * ((P*R) / (P + R + 1e-8)) (so identical texts give
//    0.999999995, never 1.0).
// Exceptions, all caught by LongBench's bare except and turned into 0.0:
//  * ValueError when either text has no sentence (empty, or only "." characters);
//  * RecursionError when a _recon backtracking path needs more nested calls than CPython's
//    default recursion limit (1000) leaves: LongBench's eval.py reaches _recon with 9 frames on
//    the stack (<module>, scorer, rouge_score, get_scores, _get_avg_scores, the metric lambda,
//    rouge_l_summary_level, _union_lcs, _recon_lcs), so a path of more than 991 _recon calls
//    gives 0.0 - measured with eval.py under CPython 3.11: a 990-word sentence scored against
//    itself (991 calls) gives 0.999999995, a 991-word one gives 0.0. Other Python versions or
//    callers with a different stack depth move this boundary; it is a constant here.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvaudit::metrics {

// The most _recon calls one backtracking path may make (see above).
inline constexpr std::size_t kRougeMaxReconCalls = 991;

double longbench_rouge_score(std::u32string_view prediction, std::u32string_view ground_truth);

}  // namespace kvaudit::metrics
