// Python `str` semantics over UTF-8 bytes: validation, len() and strip(). See python_str.h.
#include "runners/model/chat/python_str.h"

#include <cstdint>

namespace kvaudit::model {
namespace {

struct Decoded {
  char32_t code_point = 0;
  std::size_t length = 0;  // 0 when the bytes at the position are not a well-formed sequence
};

// Decodes one UTF-8 sequence at `pos` following the well-formed table of Unicode 15, §3.9 (D92).
Decoded decode_at(std::string_view text, std::size_t pos) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(pos);
  if (lead < 0x80) return {lead, 1};
  std::size_t length = 0;
  std::uint8_t second_min = 0x80;
  std::uint8_t second_max = 0xBF;
  char32_t value = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    value = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    value = lead & 0x0Fu;
    if (lead == 0xE0) second_min = 0xA0;  // no overlong forms
    if (lead == 0xED) second_max = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    value = lead & 0x07u;
    if (lead == 0xF0) second_min = 0x90;  // no overlong forms
    if (lead == 0xF4) second_max = 0x8F;  // nothing above U+10FFFF
  } else {
    return {};
  }
  if (text.size() - pos < length) return {};
  for (std::size_t i = 1; i < length; ++i) {
    const std::uint8_t continuation = byte(pos + i);
    const std::uint8_t lo = i == 1 ? second_min : std::uint8_t{0x80};
    const std::uint8_t hi = i == 1 ? second_max : std::uint8_t{0xBF};
    if (continuation < lo || continuation > hi) return {};
    value = (value << 6) | (continuation & 0x3Fu);
  }
  return {value, length};
}

// The code point that ends just before `end` (text valid UTF-8, end > 0).
Decoded decode_before(std::string_view text, std::size_t end) {
  std::size_t start = end - 1;
  while (start > 0 && (static_cast<std::uint8_t>(text[start]) & 0xC0u) == 0x80u) --start;
  return decode_at(text, start);
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8_byte(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const Decoded d = decode_at(text, pos);
    if (d.length == 0) return pos;
    pos += d.length;
  }
  return std::nullopt;
}

std::size_t python_code_point_count(std::string_view text) {
  std::size_t count = 0;
  for (const char c : text) {
    if ((static_cast<std::uint8_t>(c) & 0xC0u) != 0x80u) ++count;
  }
  return count;
}

bool python_isspace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string_view python_strip(std::string_view text) {
  std::size_t begin = 0;
  while (begin < text.size()) {
    const Decoded d = decode_at(text, begin);
    if (d.length == 0 || !python_isspace(d.code_point)) break;
    begin += d.length;
  }
  std::size_t end = text.size();
  while (end > begin) {
    const Decoded d = decode_before(text, end);
    if (d.length == 0 || !python_isspace(d.code_point)) break;
    end -= d.length;
  }
  return text.substr(begin, end - begin);
}

}  // namespace kvaudit::model
