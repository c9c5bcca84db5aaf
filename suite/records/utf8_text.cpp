// Well-formedness check and repair of UTF-8 text (Unicode 15, table 3-7).
#include "suite/records/utf8_text.h"

#include <cstddef>
#include <cstdint>

namespace kvaudit::records {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed sequence starting at text[i], or 0 if none starts there (NUL counts as
// not well-formed here).
std::size_t sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<std::uint8_t>(text[k]); };
  const std::size_t left = text.size() - i;
  const std::uint8_t b0 = byte(i);
  if (b0 == 0x00) return 0;
  if (b0 < 0x80) return 1;
  const auto continuation = [&](std::size_t k, std::uint8_t lo, std::uint8_t hi) {
    return byte(i + k) >= lo && byte(i + k) <= hi;
  };
  if (b0 >= 0xC2 && b0 <= 0xDF) return left >= 2 && continuation(1, 0x80, 0xBF) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (left < 3) return 0;
    const std::uint8_t lo = b0 == 0xE0 ? 0xA0 : 0x80;  // no overlong forms
    const std::uint8_t hi = b0 == 0xED ? 0x9F : 0xBF;  // no surrogates
    return continuation(1, lo, hi) && continuation(2, 0x80, 0xBF) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (left < 4) return 0;
    const std::uint8_t lo = b0 == 0xF0 ? 0x90 : 0x80;  // no overlong forms
    const std::uint8_t hi = b0 == 0xF4 ? 0x8F : 0xBF;  // nothing above U+10FFFF
    return continuation(1, lo, hi) && continuation(2, 0x80, 0xBF) && continuation(3, 0x80, 0xBF)
               ? 4
               : 0;
  }
  return 0;
}

}  // namespace

bool is_valid_utf8_without_nul(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = sequence_length(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string make_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = sequence_length(text, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace kvaudit::records
