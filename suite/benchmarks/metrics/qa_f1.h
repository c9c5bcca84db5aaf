// LongBench qa_f1_score (THUDM/LongBench LongBench/metrics.py), used by narrativeqa, qasper,
// multifieldqa_en, hotpotqa, 2wikimqa, musique and triviaqa:
//   normalize_answer(s) = white_space_fix(remove_articles(remove_punc(lower(s)))) where
//     lower            = str.lower() (Unicode, full mapping, final sigma; python_text.h)
//     remove_punc      = drop every character of string.punctuation (the 32 ASCII characters
//                        !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~ only: "…", "“" or "。" stay)
//     remove_articles  = re.sub(r"\b(a|an|the)\b", " ", .): a maximal run of \w characters
//                        (Unicode letters/digits/'_', not marks) equal to a, an or the
//                        becomes " "; "the\u0301" loses its "the" (U+0301 is not \w),
//                        "thé" and "the_x" do not
//     white_space_fix  = " ".join(.split()) (Python whitespace, incl. U+00A0, U+3000, U+001C)
//   tokens = normalized.split(); common = Counter(pred) & Counter(gold) (multiset intersection)
//   0 if nothing in common, else P = common/|pred|, R = common/|gold|, F1 = (2*P*R)/(P+R),
//   evaluated in that order in double precision like Python.
#pragma once

#include <string>
#include <string_view>

namespace kvaudit::metrics {

std::u32string longbench_normalize_answer(std::u32string_view text);
double longbench_qa_f1_score(std::u32string_view prediction, std::u32string_view ground_truth);

}  // namespace kvaudit::metrics
