// The essay haystack of RULER's niah tasks (niah.py; docs/design/benchmarks.md §RULER task
// families):
//  * words: the essay text with every whitespace run collapsed, split on spaces (RULER:
//    re.sub(r'\s+', " ", essay).split(" "), here without the empty strings a leading or trailing
//    space would give);
//  * a haystack of N words is the first N words, the word list repeated when N exceeds it (RULER
//    repeats the essays the same way: (haystack * repeats)[:N]);
//  * sentences: RULER uses NLTK's Punkt sent_tokenize; kvaudit uses split_sentences() below, a
//    rule-based splitter that ends a sentence after '.', '!' or '?' (plus closing quotes or
//    brackets) when whitespace and an upper-case letter, digit, quote or bracket follow, except
//    after a single capital initial or a common abbreviation (Mr., Mrs., Ms., Dr., St., Prof.,
//    e.g., i.e., etc., vs., No.). On the bundled essay (plain prose) both agree; on other text
//    the boundaries (hence the needle positions) may differ from Punkt's.
// The default is the bundled CC0 essay (data/ruler/essay.txt, 1,893 words: it is repeated for
// contexts beyond about 2.4K tokens, as RULER repeats its essays). A user essay is a UTF-8 text
// file; one with fewer than kMinEssayWords words is refused (too short to build a haystack of
// RULER's unit of 500 words).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kvaudit::benchmarks::ruler {

inline constexpr std::size_t kMinEssayWords = 500;

struct Essay {
  std::string source;  // "builtin" or the file path
  std::vector<std::string> words;

  // The first `n` words (repeating the essay), joined with single spaces.
  std::string first_words(std::size_t n) const;
  // How many times the essay is read for `n` words (1 when it is long enough).
  std::size_t repeats_for(std::size_t n) const;
};

// "builtin" (or empty) -> the bundled essay; otherwise the file. Throws InputError naming the file
// when it cannot be read, is not UTF-8 text, or has fewer than kMinEssayWords words.
Essay load_essay(const std::string& source);
Essay essay_from_text(std::string_view text, std::string source);

std::vector<std::string> split_sentences(std::string_view text);

}  // namespace kvaudit::benchmarks::ruler
