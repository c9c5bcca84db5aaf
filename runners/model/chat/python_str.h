// Python `str` semantics over UTF-8 bytes, as far as chat templates and the kvpress prompt split
// need them: HF renders templates on Python strings, so "length" means code points (kvpress's
// separator is '#' * (len(context) + 10)) and Jinja's `trim` filter is Python's str.strip(), which
// strips every code point for which str.isspace() is true (Py_UNICODE_ISSPACE; CPython 3.11,
// Objects/unicodetype_db.h): U+0009-U+000D, U+001C-U+001F, U+0020, U+0085, U+00A0, U+1680,
// U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. Not U+200B, U+180E or U+FEFF.
//
// The UTF-8 validation and decoding are base/utf8.h's; the functions below give them Python's view.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "base/utf8.h"

namespace kvaudit::model {

// Byte offset of the first byte that does not start a well-formed UTF-8 sequence (overlong forms,
// surrogates, values above U+10FFFF and truncated sequences are ill-formed); nullopt when `text`
// is valid UTF-8, i.e. when Python could hold it as a str.
inline std::optional<std::size_t> first_invalid_utf8_byte(std::string_view text) {
  return first_invalid_utf8_offset(text);
}

// len(text) in Python: the number of code points. `text` must be valid UTF-8.
inline std::size_t python_code_point_count(std::string_view text) {
  return count_utf8_code_points(text);
}

// True when the code point is whitespace for Python's str.isspace() (the list above).
bool python_isspace(char32_t code_point);

// text.strip() in Python (what Jinja's `trim` filter returns). `text` must be valid UTF-8; the
// result is a view into it.
std::string_view python_strip(std::string_view text);

}  // namespace kvaudit::model
