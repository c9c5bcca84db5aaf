// A pre-tokenizer split pattern compiled with PCRE2 (UTF | UCP, JIT when available), used with HF
// tokenizers' "Isolated" behaviour: every match and every stretch between two matches becomes a
// piece; empty pieces are dropped; after an empty match the search moves on one code point
// (Oniguruma's find_iter, which HF tokenizers uses).
//
// Engine differences from Oniguruma (HF's regex engine): Oniguruma's \s is Unicode White_Space;
// PCRE2 10.42's \s under UCP also matches U+180E (MONGOLIAN VOWEL SEPARATOR, White_Space until
// Unicode 6.3). The pattern is therefore rewritten before compiling: outside character classes
// \s becomes the explicit White_Space class and \S its negation; inside a class \s becomes the
// White_Space members (a \S inside a class is left to PCRE2). See
// docs/design/tokenizers.md §Pre-tokenizer patterns.
//
// Unicode data: PCRE2 10.42 (Debian 12) has Unicode 14 tables, HF's Oniguruma newer ones, so a code
// point assigned after Unicode 14 (e.g. U+1CCF0, an Nd digit since Unicode 16) can fall in a
// different class here and split differently. Assigned-in-14 text matches HF exactly
// (tools/golden/check_tokenizer_random.py).
//
// Matching is bounded (match limit, heap limit); exceeding a bound is a ModelInputError naming the
// pattern's origin.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvaudit::model {

class PretokenizerRegex {
 public:
  // `literal`: `pattern` is a plain string (HF Split {"String": ...}), not a regex. `origin` names
  // the file and field for messages, e.g. "tokenizer.json: pre_tokenizer.pretokenizers[0]".
  // Throws ModelInputError when the pattern does not compile (PCRE2's message and offset).
  PretokenizerRegex(std::string_view pattern, bool literal, std::string origin);

  // Appends the pieces of `text` (valid UTF-8) to `pieces`; they view `text`.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

  const std::string& pattern() const { return pattern_; }
  bool uses_jit() const;

 private:
  struct Compiled;
  std::string pattern_;
  std::string origin_;
  std::shared_ptr<const Compiled> compiled_;
};

// The pattern with \s / \S spelled as Unicode White_Space (see above); exposed for tests.
std::string with_unicode_white_space_classes(std::string_view pattern);

}  // namespace kvaudit::model
