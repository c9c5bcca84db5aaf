// Essay haystack: loading, words and sentences (see essay.h).
#include "suite/benchmarks/ruler/essay.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include "suite/benchmarks/ruler/bundled_data.h"
#include "suite/benchmarks/ruler/text_file.h"
#include "base/errors.h"

namespace kvaudit::benchmarks::ruler {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_closer(char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }
bool is_opener(char c) { return c == '"' || c == '\'' || c == '(' || c == '['; }

// The word that ends just before position `end` (exclusive), without its final period.
std::string_view word_before(std::string_view text, std::size_t end) {
  std::size_t start = end;
  while (start > 0 && !is_space(text[start - 1])) --start;
  return text.substr(start, end - start);
}

bool is_abbreviation(std::string_view word) {
  static constexpr std::array<std::string_view, 13> kAbbreviations = {
      "Mr", "Mrs", "Ms", "Dr", "St", "Prof", "e.g", "i.e", "etc", "vs", "No", "Jr", "Sr"};
  if (word.size() == 1 && is_upper(word[0])) return true;  // an initial
  return std::find(kAbbreviations.begin(), kAbbreviations.end(), word) != kAbbreviations.end();
}

}  // namespace

std::string Essay::first_words(std::size_t n) const {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ' ';
    out += words[i % words.size()];
  }
  return out;
}

std::size_t Essay::repeats_for(std::size_t n) const {
  return words.empty() ? 0 : (n + words.size() - 1) / words.size();
}

Essay essay_from_text(std::string_view text, std::string source) {
  Essay essay;
  essay.source = std::move(source);
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) essay.words.emplace_back(text.substr(start, i - start));
  }
  if (essay.words.size() < kMinEssayWords) {
    throw InputError("essay " + essay.source + ": " + std::to_string(essay.words.size()) +
                     " words; a RULER essay haystack needs at least " +
                     std::to_string(kMinEssayWords) + " (RULER's essay unit)");
  }
  return essay;
}

Essay load_essay(const std::string& source) {
  if (source.empty() || source == "builtin") return essay_from_text(bundled_essay(), "builtin");
  return essay_from_text(read_text_file(source, "essay"), source);
}

std::vector<std::string> split_sentences(std::string_view text) {
  std::vector<std::string> sentences;
  std::size_t start = 0;
  while (start < text.size() && is_space(text[start])) ++start;
  std::size_t i = start;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '.' || c == '!' || c == '?') {
      std::size_t end = i + 1;
      while (end < text.size() && (text[end] == '.' || text[end] == '!' || text[end] == '?')) ++end;
      while (end < text.size() && is_closer(text[end])) ++end;
      std::size_t next = end;
      while (next < text.size() && is_space(text[next])) ++next;
      const bool boundary = next > end && next < text.size() &&
                            (is_upper(text[next]) || is_digit(text[next]) || is_opener(text[next]));
      if (boundary && !(c == '.' && is_abbreviation(word_before(text, i)))) {
        sentences.emplace_back(text.substr(start, end - start));
        start = next;
        i = next;
        continue;
      }
      i = end;
      continue;
    }
    ++i;
  }
  std::size_t stop = text.size();
  while (stop > start && is_space(text[stop - 1])) --stop;
  if (stop > start) sentences.emplace_back(text.substr(start, stop - start));
  return sentences;
}

}  // namespace kvaudit::benchmarks::ruler
