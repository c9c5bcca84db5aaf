// CPython 3.11 `str` behaviour that the official RULER and LongBench scorers rely on, reproduced on
// code points (std::u32string) with utf8proc (Unicode 15.0 tables in Debian's 2.8.0) for the
// character properties. Every function names the Python expression it reproduces.
//
// Bytes -> code points: Python receives `str`, the suite receives UTF-8 bytes (model output decoded
// by the tokenizer, answers from JSON). Invalid UTF-8 is NOT an error: base/utf8.h's
// decode_utf8_replace() decodes it exactly as CPython's bytes.decode("utf-8", errors="replace")
// does (each maximal ill-formed subpart, per Unicode's "best practice" that CPython follows,
// becomes one U+FFFD; surrogate code points encoded as ED A0..BF xx are ill-formed) - which is
// also what HF tokenizers' decode() hands the official Python scorers when a generation stops
// inside a multi-byte character. encode_utf8() (str.encode("utf-8")) is base/utf8.h's too.
//
// Unicode behaviours reproduced (tests/benchmarks/metrics/python_text_test.cpp checks each one on
// every code point against CPython's own tables in tests/golden/metrics/unicode_python.json):
//  * str.isspace() (str.split(), str.strip()): category Zs or bidirectional class WS, B or S -
//    which includes U+001C..U+001F, U+0085 and U+00A0, and excludes U+200B and U+FEFF.
//  * str.lower(): the full lowercase mapping, i.e. the simple mapping (utf8proc_tolower) except
//    U+0130 -> "i\u0307", and U+03A3 (capital sigma) -> U+03C2 (final sigma) in the Final_Sigma
//    context \p{Cased}\p{Case_Ignorable}* U+03A3 !(\p{Case_Ignorable}*\p{Cased}), else U+03C3.
//  * re `\w` (str patterns): categories L* and N* (Python: isalpha/isdecimal/isdigit/isnumeric)
//    and '_'; marks (Mn, Mc) are not word characters.
//  * re `\d` (str patterns): category Nd (any script's decimal digits: "١٢" and "３" match).
// Known deviation: code points that Python 3.11's Unicode 14.0 database leaves unassigned but
// Unicode 15.0 assigns (e.g. Kawi, CJK Extension H) get their Unicode 15.0 properties here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"

namespace kvaudit::metrics {

// Character classes (see the file comment).
bool python_isspace(char32_t c);
bool python_re_word(char32_t c);
bool python_re_decimal(char32_t c);
// Unicode Case_Ignorable, and Cased where the Final_Sigma rule can observe it: the rule skips
// Case_Ignorable code points before it asks Cased, so the Other_Lowercase modifier letters (Lm, all
// Case_Ignorable) are left out; categories Lu, Ll, Lt and the other Other_Lowercase /
// Other_Uppercase code points (ª º, Roman numerals, circled and squared letters) are Cased.
bool cased_for_final_sigma(char32_t c);
bool unicode_case_ignorable(char32_t c);

// str.lower().
std::u32string python_lower(std::u32string_view text);
// str.strip() (no argument: Python whitespace).
std::u32string_view python_strip(std::u32string_view text);
// str.lstrip(chars) for one character.
std::u32string_view python_lstrip_char(std::u32string_view text, char32_t c);
// str.split() (no argument): runs of Python whitespace separate, empty pieces dropped.
std::vector<std::u32string> python_split_whitespace(std::u32string_view text);
// str.split(sep) for a one-character separator (empty pieces kept).
std::vector<std::u32string> python_split_char(std::u32string_view text, char32_t sep);
// " ".join(text.split()).
std::u32string python_collapse_whitespace(std::u32string_view text);

}  // namespace kvaudit::metrics
