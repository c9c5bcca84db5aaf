// The one UTF-8 decoder of kvaudit (tokenizers, chat templates, records, metrics).
//
// Everything is built on decode_utf8_at(): the well-formed sequences are those of Unicode 15
// §3.9, table 3-7 (no overlong forms, no surrogates ED A0..BF xx, nothing above U+10FFFF, bytes
// 80..C1 and F5..FF never start a sequence). An ill-formed position is reported with the length
// of its "maximal subpart": the longest prefix of a well-formed sequence that starts there, or the
// single byte when none does (Unicode §3.9, "U+FFFD Substitution of Maximal Subparts"). That is
// the substitution CPython's bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy
// make (HF tokenizers decode with the latter): "\xF0\x9F\x98" is one U+FFFD, "\xE2\x28\xA1" is
// U+FFFD '(' U+FFFD and the surrogate "\xED\xA0\x80" is three.
//
// U+0000 is an ordinary code point here; callers that refuse NUL (HDF5 strings) check for it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kvaudit {

inline constexpr char32_t kReplacementCodePoint = 0xFFFD;
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD as UTF-8

// What decoding finds at one byte offset.
struct Utf8Sequence {
  char32_t code_point = kReplacementCodePoint;  // the scalar value; U+FFFD when ill-formed
  std::size_t length = 0;  // bytes: 1..4 when well-formed, the maximal subpart (1..3) when not
  bool well_formed = false;
};

// The sequence that starts at byte `offset` of `text` (offset < text.size()).
Utf8Sequence decode_utf8_at(std::string_view text, std::size_t offset);

// The sequence that ends just before byte `end` of `text` (0 < end <= text.size()): the
// well-formed sequence ending there, or ill-formed with length 1 (the byte before `end`) when no
// well-formed sequence ends there.
Utf8Sequence decode_utf8_before(std::string_view text, std::size_t end);

// Byte offset of the first ill-formed sequence of `text`, nullopt when `text` is valid UTF-8.
std::optional<std::size_t> first_invalid_utf8_offset(std::string_view text);

// The number of code points of valid UTF-8 `text` (Python's len() of the str): the bytes that are
// not continuation bytes (10xxxxxx).
std::size_t count_utf8_code_points(std::string_view text);

// `bytes` as valid UTF-8, each maximal ill-formed subpart replaced by one U+FFFD (Rust's
// String::from_utf8_lossy). Valid UTF-8 comes back unchanged.
std::string decode_utf8_lossy(std::string_view bytes);

// `bytes` as code points, each maximal ill-formed subpart replaced by one U+FFFD (CPython's
// bytes.decode("utf-8", errors="replace")).
std::u32string decode_utf8_replace(std::string_view bytes);

// Appends the UTF-8 encoding (1..4 bytes) of `code_point`, which must be a Unicode scalar value.
void append_utf8(std::string& out, char32_t code_point);

// The UTF-8 encoding of `code_points` (str.encode("utf-8")); each must be a scalar value.
std::string encode_utf8(std::u32string_view code_points);

}  // namespace kvaudit
