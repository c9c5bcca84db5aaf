// UTF-8 helpers for the tokenizers: validation, code point iteration and lossy decoding.
//
// decode_utf8_lossy() follows the Unicode "maximal subpart" practice (Unicode 15 §3.9, U+FFFD
// substitution), which is what Rust's String::from_utf8_lossy (HF tokenizers' ByteLevel decoder)
// and Python's bytes.decode("utf-8", "replace") do: each maximal prefix of a well-formed sequence
// that cannot be completed, and each byte that cannot start one, becomes one U+FFFD.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kvaudit::model {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Byte offset of the first byte that is not part of a well-formed UTF-8 sequence, or nullopt when
// `text` is valid UTF-8 (NUL bytes are valid).
std::optional<std::size_t> first_invalid_utf8_offset(std::string_view text);

// `bytes` as UTF-8 with ill-formed parts replaced by U+FFFD (see above).
std::string decode_utf8_lossy(std::string_view bytes);

// Decodes the code point starting at `offset` of valid UTF-8 `text`; returns its byte length
// (1..4) and stores the code point. `offset` must be < text.size().
std::size_t decode_code_point(std::string_view text, std::size_t offset, char32_t& code_point);

// The code point ending just before `end` (end > 0) of valid UTF-8 `text`; returns its length.
std::size_t decode_code_point_before(std::string_view text, std::size_t end, char32_t& code_point);

// Appends the UTF-8 encoding of `code_point` (must be a Unicode scalar value).
void append_utf8(std::string& out, char32_t code_point);

}  // namespace kvaudit::model
