// ROUGE-L F as rouge==1.0.1 computes it inside LongBench's rouge_score; see rouge_l.h.
#include "suite/benchmarks/metrics/rouge_l.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "suite/benchmarks/metrics/python_text.h"

namespace kvaudit::metrics {
namespace {

using Sentence = std::vector<int>;  // word ids

class WordIds {
 public:
  int id(const std::u32string& word) {
    const auto [it, inserted] = ids_.emplace(word, static_cast<int>(ids_.size()));
    return it->second;
  }

 private:
  std::unordered_map<std::u32string, int> ids_;
};

// [" ".join(_.split()) for _ in text.split(".") if len(_) > 0], each split on " " into words.
std::vector<Sentence> sentences_of(std::u32string_view text, WordIds& ids) {
  std::vector<Sentence> sentences;
  for (const auto& piece : python_split_char(text, U'.')) {
    if (piece.empty()) continue;
    Sentence words;
    for (const auto& word : python_split_char(python_collapse_whitespace(piece), U' ')) {
      words.push_back(ids.id(word));
    }
    sentences.push_back(std::move(words));
  }
  return sentences;
}

std::size_t distinct_words(const std::vector<Sentence>& sentences) {
  std::unordered_set<int> words;
  for (const auto& sentence : sentences) words.insert(sentence.begin(), sentence.end());
  return words.size();
}

// _recon_lcs(x, y): the words of the LCS that _recon reads back, added to `lcs_union`. Returns
// false where CPython would raise RecursionError.
bool add_recon_lcs(const Sentence& x, const Sentence& y, std::unordered_set<int>& lcs_union) {
  const std::size_t n = x.size();
  const std::size_t m = y.size();
  // Every step lowers i or j (or both) by one and the path stops at i == 0 or j == 0, so it
  // makes at least min(n, m) steps (min(n, m) + 1 calls).
  if (std::min(n, m) + 1 > kRougeMaxReconCalls) return false;
  // LCS lengths are at most min(n, m) <= 990: 16 bits suffice.
  std::vector<std::uint16_t> table((n + 1) * (m + 1), 0);
  const auto at = [m](std::size_t i, std::size_t j) { return i * (m + 1) + j; };
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      table[at(i, j)] = x[i - 1] == y[j - 1]
                            ? static_cast<std::uint16_t>(table[at(i - 1, j - 1)] + 1)
                            : std::max(table[at(i - 1, j)], table[at(i, j - 1)]);
    }
  }
  std::vector<int> words;
  std::size_t i = n;
  std::size_t j = m;
  std::size_t calls = 1;
  while (i != 0 && j != 0) {
    if (x[i - 1] == y[j - 1]) {
      words.push_back(x[i - 1]);
      --i;
      --j;
    } else if (table[at(i - 1, j)] > table[at(i, j - 1)]) {
      --i;
    } else {
      --j;
    }
    ++calls;
  }
  if (calls > kRougeMaxReconCalls) return false;
  lcs_union.insert(words.begin(), words.end());
  return true;
}

}  // namespace

double longbench_rouge_score(std::u32string_view prediction, std::u32string_view ground_truth) {
  WordIds ids;
  const auto hypothesis = sentences_of(prediction, ids);
  const auto reference = sentences_of(ground_truth, ids);
  if (hypothesis.empty() || reference.empty()) return 0.0;  // ValueError in rouge_n / rouge_l
  const auto m = static_cast<double>(distinct_words(reference));
  const auto n = static_cast<double>(distinct_words(hypothesis));
  std::unordered_set<int> lcs_union;
  for (const auto& reference_sentence : reference) {
    for (const auto& hypothesis_sentence : hypothesis) {
      if (!add_recon_lcs(reference_sentence, hypothesis_sentence, lcs_union)) return 0.0;
    }
  }
  const auto llcs = static_cast<double>(lcs_union.size());
  const double r_lcs = llcs / m;
  const double p_lcs = llcs / n;
  return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8));
}

}  // namespace kvaudit::metrics
