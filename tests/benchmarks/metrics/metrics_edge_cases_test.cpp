// Hand-written edge cases of each metric, with the value Python gives (worked out from the
// upstream code and confirmed with the official implementations when this test was written).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "suite/benchmarks/metrics/classification.h"
#include "suite/benchmarks/metrics/code_similarity.h"
#include "suite/benchmarks/metrics/difflib_ratio.h"
#include "suite/benchmarks/metrics/metric.h"
#include "suite/benchmarks/metrics/number_match.h"
#include "suite/benchmarks/metrics/qa_f1.h"
#include "suite/benchmarks/metrics/rouge_l.h"
#include "suite/benchmarks/metrics/ruler_string_match.h"
#include "suite/benchmarks/metrics/score_request.h"
#include "suite/benchmarks/metrics/task_scoring.h"
#include "base/errors.h"

namespace kvaudit::metrics {
namespace {

using Strings = std::vector<std::string>;
using Texts = std::vector<std::u32string>;
constexpr double kIdenticalRouge = 2.0 * (1.0 / (2.0 + 1e-8));  // 0.999999995

TEST(RulerStringMatch, CaseOnlyNormalisationAndPostprocessing) {
  // strip, control characters -> '\n', strip; references keep their tab, so "foo\tbar" misses;
  // the empty reference always matches.
  EXPECT_DOUBLE_EQ(
      score_request("string_match_all", " Foo\tBAR ", Strings{"foo", "bar", "foo\tbar", ""}), 0.75);
  EXPECT_EQ(ruler_postprocess_prediction(U"\u00A0 a\x01"
                                         U"b\x1F "),
            U"a\nb");
  // "İ".lower() is "i\u0307": "İstanbul" does not contain "istanbul" after lowering.
  EXPECT_EQ(score_request("string_match_part", "\xC4\xB0stanbul", Strings{"istanbul"}), 0.0);
  EXPECT_EQ(score_request("string_match_part", "ISTANBUL", Strings{"nope", "istanbul"}), 1.0);
  EXPECT_THROW(score_request("string_match_all", "x", Strings{}), InputError);
  EXPECT_THROW(score_request("string_match_part", "x", Strings{}), InputError);
}

TEST(QaF1, NormalizationOrderAndUnicode) {
  // '_' and '-' are punctuation (removed before the article regex); U+0301 is not \w, so the
  // "the" before it is an article; "thé" is not.
  EXPECT_EQ(longbench_normalize_answer(U"The\u0301 th\u00E9 the_x ann AN, a-n"),
            U"\u0301 th\u00E9 thex ann");
  EXPECT_EQ(longbench_normalize_answer(U"\u039F\u0394\u039F\u03A3  \u039E\u00A0the"),
            U"\u03BF\u03B4\u03BF\u03C2 \u03BE");
  EXPECT_DOUBLE_EQ(longbench_qa_f1_score(U"The Cat!", U"cat"), 1.0);
  EXPECT_EQ(longbench_qa_f1_score(U"a an the", U"the"), 0.0);  // both normalize to nothing
  EXPECT_DOUBLE_EQ(longbench_qa_f1_score(U"Paris, France", U"paris"), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(longbench_qa_f1_score(U"x x y", U"x y y"), 2.0 / 3.0);  // Counter &
  EXPECT_EQ(longbench_qa_f1_score(U"\u2026", U"\u2026 ."), 1.0);  // "…" is not ASCII punctuation
}

TEST(RougeL, Rouge101Quirks) {
  EXPECT_EQ(longbench_rouge_score(U"the cat sat", U"the cat sat"), kIdenticalRouge);
  // A whitespace-only piece is the sentence "" with the empty word, which matches itself.
  EXPECT_EQ(longbench_rouge_score(U" ", U" "), kIdenticalRouge);
  EXPECT_EQ(longbench_rouge_score(U"...", U"a"), 0.0);  // no hypothesis sentence: ValueError
  EXPECT_EQ(longbench_rouge_score(U"a", U""), 0.0);
  EXPECT_EQ(longbench_rouge_score(U"x y z", U"X Y Z"), 0.0);  // no lowercasing
  // Hypothesis words {a, b, c}, reference words {a, c}; LCS unions {a} and {c}: R = 1, P = 2/3.
  const double p = 2.0 / 3.0;
  const double r = 1.0;
  EXPECT_EQ(longbench_rouge_score(U"a b. c", U"a c"), 2.0 * ((p * r) / (p + r + 1e-8)));
  EXPECT_EQ(longbench_rouge_score(U"a\u00A0b. a", U"a b"), kIdenticalRouge);
}

TEST(RougeL, RecursionLimitOfEvalPy) {
  const auto words = [](int k) {
    std::u32string text;
    for (int j = 0; j < k; ++j) {
      if (j) text += U' ';
      text += U'w';
      for (const char ch : std::to_string(j)) text += static_cast<char32_t>(ch);
    }
    return text;
  };
  // Measured with LongBench's eval.py under CPython 3.11: 990 words against themselves (991 _recon
  // calls) score, 991 words raise RecursionError (0.0).
  const std::u32string ok = words(990);
  const std::u32string too_deep = words(991);
  EXPECT_EQ(kRougeMaxReconCalls, 991u);
  EXPECT_EQ(longbench_rouge_score(ok, ok), kIdenticalRouge);
  EXPECT_EQ(longbench_rouge_score(too_deep, too_deep), 0.0);
  // One more word after the shared 990 costs one more step: RecursionError again.
  EXPECT_EQ(longbench_rouge_score(too_deep, ok), 0.0);
  // Split by '.' into two sentences, 991 words score again.
  const std::u32string split = words(495) + U". " + words(496);
  EXPECT_EQ(longbench_rouge_score(split, split), kIdenticalRouge);
}

TEST(Classification, RemoveWhileIteratingQuirk) {
  // 'Number' is removed, 'Num' slides into its slot and is skipped: the list keeps two entries.
  const Texts classes{U"Number", U"Num", U"Number of something"};
  EXPECT_EQ(longbench_classification_score(U"Number Number of something", U"Number of something",
                                           classes),
            0.5);
  EXPECT_EQ(longbench_classification_score(U"nothing here", U"Num", classes), 0.0);
  EXPECT_EQ(longbench_classification_score(U"Number of something", U"Number of something",
                                           Texts{U"Number of something"}),
            1.0);
  // Case-sensitive substring test.
  EXPECT_EQ(longbench_classification_score(U"number of something", U"Number of something", classes),
            0.0);
  // Duplicates: list.remove drops the first equal element.
  EXPECT_EQ(
      longbench_classification_score(U"Date Dates", U"Dates", Texts{U"Date", U"Date", U"Dates"}),
      0.5);
}

TEST(NumberMatch, UnicodeDigitsAndStrings) {
  EXPECT_DOUBLE_EQ(score_request("count_score", "12 and 12 and 7", Strings{"12"}), 2.0 / 3.0);
  EXPECT_EQ(score_request("count_score", "007", Strings{"7"}), 0.0);
  EXPECT_EQ(score_request("count_score", "no numbers", Strings{"7"}), 0.0);
  EXPECT_EQ(python_decimal_runs(U"\u0661\u0662x\uFF13 4.5").size(), 4u);
  EXPECT_EQ(score_request("retrieval_score", "Paragraph 3, Paragraph 30", Strings{"Paragraph 3"}),
            0.5);
  EXPECT_EQ(score_request("retrieval_zh_score",
                          "\xE6\xAE\xB5\xE8\x90\xBD"
                          "5",
                          Strings{"\xE6\xAE\xB5\xE8\x90\xBD"
                                  "5"}),
            1.0);
  EXPECT_THROW(score_request("retrieval_score", "3", Strings{"paragraph 3"}), InputError);
}

TEST(CodeSim, FuzzywuzzyOverDifflib) {
  EXPECT_EQ(fuzzywuzzy_ratio(U"", U""), 100);  // check_for_equivalence comes first
  EXPECT_EQ(fuzzywuzzy_ratio(U"abc", U""), 0);
  EXPECT_EQ(fuzzywuzzy_ratio(U"ab", U"abcd"), 67);
  EXPECT_EQ(fuzzywuzzy_ratio(U"a", U"a" + std::u32string(14, U'b')), 12);      // 12.5 -> 12
  EXPECT_EQ(fuzzywuzzy_ratio(U"abc", U"abc" + std::u32string(10, U'x')), 38);  // 37.5 -> 38
  // autojunk: in a 240-character b both 'a' and 'b' are popular; a match can only grow by the
  // extension loops from (0, 0), which a leading mismatch prevents.
  std::u32string ab, ba;
  for (int k = 0; k < 120; ++k) ab += U"ab";
  for (int k = 0; k < 5; ++k) ba += U"ba";
  EXPECT_EQ(fuzzywuzzy_ratio(ba, ab), 0);
  EXPECT_EQ(fuzzywuzzy_ratio(ab.substr(0, 10), ab), 8);
  EXPECT_DOUBLE_EQ(longbench_code_sim_score(U"\n\n# c\nreturn x", U"return x"), 1.0);
  EXPECT_EQ(longbench_code_sim_score(U"# only\n// comments", U""), 1.0);  // "" vs "": 100
  EXPECT_EQ(difflib_ratio(U"", U""), 1.0);
}

TEST(TaskScoring, FirstLineDatasetsAndCatalogue) {
  EXPECT_EQ(first_line_after_leading_newlines("\n\nfirst\nsecond"), "first");
  EXPECT_EQ(first_line_after_leading_newlines("\n\n"), "");
  // triviaqa keeps the first line only; narrativeqa does not.
  EXPECT_EQ(score_task_request(benchmarks::BenchmarkKind::longbench, "triviaqa", "\nParis\nLondon",
                               Strings{"London"}),
            0.0);
  EXPECT_EQ(score_task_request(benchmarks::BenchmarkKind::longbench, "narrativeqa", "London",
                               Strings{"Paris", "london"}),
            1.0);
  EXPECT_EQ(metric_of_task(benchmarks::BenchmarkKind::ruler, "qa_1"), Metric::string_match_part);
  EXPECT_EQ(metric_of_task(benchmarks::BenchmarkKind::ruler, "vt"), Metric::string_match_all);
  EXPECT_EQ(metric_of_task(benchmarks::BenchmarkKind::longbench, "lcc"), Metric::code_sim_score);
  EXPECT_THROW(metric_of_task(benchmarks::BenchmarkKind::longbench, "dureader"), InputError);
  EXPECT_THROW(metric_of_task(benchmarks::BenchmarkKind::ruler, "nope"), InputError);
}

TEST(MetricNames, RejectsUnknownAndJiebaMetrics) {
  for (const char* name : {"qa_f1_zh_score", "rouge_zh_score"}) {
    try {
      parse_metric(name);
      ADD_FAILURE() << name << " accepted";
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find("jieba"), std::string::npos) << error.what();
    }
  }
  try {
    parse_metric("bleu");
    ADD_FAILURE() << "bleu accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("known: string_match_all"), std::string::npos);
  }
  EXPECT_EQ(metric_name(parse_metric("rouge_score")), "rouge_score");
}

}  // namespace
}  // namespace kvaudit::metrics
