// UTF-8 for the tokenizers: base/utf8.h (validation, maximal-subpart lossy decoding as HF
// tokenizers' ByteLevel decoder does with Rust's String::from_utf8_lossy, encoding), plus the
// out-parameter iteration the tokenizers use on text they have already validated.
#pragma once

#include <cstddef>
#include <string_view>

#include "base/utf8.h"

namespace kvaudit::model {

// Decodes the code point starting at `offset` (< text.size()) of valid UTF-8 `text`; returns its
// byte length (1..4) and stores the code point.
inline std::size_t decode_code_point(std::string_view text, std::size_t offset,
                                     char32_t& code_point) {
  const Utf8Sequence sequence = decode_utf8_at(text, offset);
  code_point = sequence.code_point;
  return sequence.length;
}

// The code point ending just before `end` (end > 0) of valid UTF-8 `text`; returns its length.
inline std::size_t decode_code_point_before(std::string_view text, std::size_t end,
                                            char32_t& code_point) {
  const Utf8Sequence sequence = decode_utf8_before(text, end);
  code_point = sequence.code_point;
  return sequence.length;
}

}  // namespace kvaudit::model
