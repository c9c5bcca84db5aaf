// LongBench normalize_answer and qa_f1_score; see qa_f1.h.
#include "suite/benchmarks/metrics/qa_f1.h"

#include <algorithm>
#include <map>
#include <vector>

#include "suite/benchmarks/metrics/python_text.h"

namespace kvaudit::metrics {
namespace {

bool is_ascii_punctuation(char32_t c) {  // Python string.punctuation
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

bool is_article(std::u32string_view word) {
  return word == U"a" || word == U"an" || word == U"the";
}

std::u32string remove_articles(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (!python_re_word(text[i])) {
      out.push_back(text[i++]);
      continue;
    }
    const std::size_t start = i;
    while (i < text.size() && python_re_word(text[i])) ++i;
    const std::u32string_view word = text.substr(start, i - start);
    if (is_article(word)) {
      out.push_back(U' ');
    } else {
      out += word;
    }
  }
  return out;
}

std::map<std::u32string, int> counter(const std::vector<std::u32string>& tokens) {
  std::map<std::u32string, int> counts;
  for (const auto& token : tokens) ++counts[token];
  return counts;
}

}  // namespace

std::u32string longbench_normalize_answer(std::u32string_view text) {
  const std::u32string lowered = python_lower(text);
  std::u32string without_punctuation;
  without_punctuation.reserve(lowered.size());
  for (const char32_t c : lowered) {
    if (!is_ascii_punctuation(c)) without_punctuation.push_back(c);
  }
  return python_collapse_whitespace(remove_articles(without_punctuation));
}

double longbench_qa_f1_score(std::u32string_view prediction, std::u32string_view ground_truth) {
  const auto prediction_tokens = python_split_whitespace(longbench_normalize_answer(prediction));
  const auto ground_truth_tokens =
      python_split_whitespace(longbench_normalize_answer(ground_truth));
  const auto prediction_counts = counter(prediction_tokens);
  const auto ground_truth_counts = counter(ground_truth_tokens);
  long num_same = 0;
  for (const auto& [token, count] : prediction_counts) {
    const auto it = ground_truth_counts.find(token);
    if (it != ground_truth_counts.end()) num_same += std::min(count, it->second);
  }
  if (num_same == 0) return 0.0;
  const double precision =
      1.0 * static_cast<double>(num_same) / static_cast<double>(prediction_tokens.size());
  const double recall =
      1.0 * static_cast<double>(num_same) / static_cast<double>(ground_truth_tokens.size());
  return (2 * precision * recall) / (precision + recall);
}

}  // namespace kvaudit::metrics
