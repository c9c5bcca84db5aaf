// Word lists for the RULER generator: see word_lists.h.
#include "suite/benchmarks/ruler/word_lists.h"

#include <algorithm>

#include "suite/benchmarks/ruler/bundled_data.h"

namespace kvaudit::benchmarks::ruler {
namespace {

void sort_unique(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

std::vector<std::string> parse_word_list(std::string_view text) {
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    if (!line.empty()) words.emplace_back(line);
    start = end + 1;
  }
  return words;
}

const WordLists& bundled_word_lists() {
  static const WordLists lists = [] {
    WordLists l;
    l.adjectives = parse_word_list(bundled_adjective_list());
    l.nouns = parse_word_list(bundled_noun_list());
    const auto verbs = parse_word_list(bundled_verb_list());
    l.cwe_pool = l.nouns;
    l.cwe_pool.insert(l.cwe_pool.end(), l.adjectives.begin(), l.adjectives.end());
    l.cwe_pool.insert(l.cwe_pool.end(), verbs.begin(), verbs.end());
    sort_unique(l.adjectives);
    sort_unique(l.nouns);
    sort_unique(l.cwe_pool);
    return l;
  }();
  return lists;
}

}  // namespace kvaudit::benchmarks::ruler
