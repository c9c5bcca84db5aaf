// The vocabularies RULER draws words from (docs/design/benchmarks.md §RULER task families), built
// from the bundled
// wonderwords lists (bundled_data.h) exactly as RULER builds them from wonderwords' files:
//  * a list file is read line by line with trailing whitespace removed (wonderwords'
//    _get_words_from_text_file: readlines + rstrip);
//  * needle keys of type "words": the sorted, deduplicated `adjective-noun` cross product; a key
//    is one uniform draw from it, i.e. (adjective, noun) drawn independently from the
//    deduplicated lists (every distinct pair is one distinct string);
//  * cwe's vocabulary: nouns + adjectives + verbs, sorted and deduplicated (RULER then shuffles it
//    with random.Random(seed); the generator does that with its fixed stream).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvaudit::benchmarks::ruler {

// Lines of a word-list text, trailing whitespace removed; empty lines dropped.
std::vector<std::string> parse_word_list(std::string_view text);

struct WordLists {
  std::vector<std::string> adjectives;  // sorted, unique
  std::vector<std::string> nouns;       // sorted, unique
  std::vector<std::string> cwe_pool;    // nouns ∪ adjectives ∪ verbs, sorted, unique
};

// The bundled lists, parsed once.
const WordLists& bundled_word_lists();

}  // namespace kvaudit::benchmarks::ruler
