// UTF-8 decoding with maximal-subpart U+FFFD substitution, and encoding; see utf8.h.
#include "base/utf8.h"

#include <cstdint>

namespace kvaudit {
namespace {

constexpr std::size_t kMaxSequenceLength = 4;

bool is_continuation(char c) { return (static_cast<std::uint8_t>(c) & 0xC0u) == 0x80u; }

Utf8Sequence ill_formed(std::size_t maximal_subpart) {
  return {kReplacementCodePoint, maximal_subpart, false};
}

}  // namespace

Utf8Sequence decode_utf8_at(std::string_view text, std::size_t offset) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(offset);
  if (lead < 0x80) return {lead, 1, true};
  // Unicode §3.9 table 3-7: the lead fixes the length and the range of the second byte; every
  // other continuation byte is 80..BF.
  std::size_t length = 0;
  std::uint8_t second_low = 0x80;
  std::uint8_t second_high = 0xBF;
  char32_t value = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    value = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    value = lead & 0x0Fu;
    if (lead == 0xE0) second_low = 0xA0;   // no overlong forms
    if (lead == 0xED) second_high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    value = lead & 0x07u;
    if (lead == 0xF0) second_low = 0x90;   // no overlong forms
    if (lead == 0xF4) second_high = 0x8F;  // nothing above U+10FFFF
  } else {
    return ill_formed(1);  // 80..C1 and F5..FF never start a sequence
  }
  for (std::size_t k = 1; k < length; ++k) {
    const std::size_t i = offset + k;
    if (i >= text.size()) return ill_formed(k);  // truncated: bytes [offset, i) are the subpart
    const std::uint8_t b = byte(i);
    const std::uint8_t low = k == 1 ? second_low : std::uint8_t{0x80};
    const std::uint8_t high = k == 1 ? second_high : std::uint8_t{0xBF};
    if (b < low || b > high) return ill_formed(k);  // byte i starts afresh
    value = (value << 6) | (b & 0x3Fu);
  }
  return {value, length, true};
}

Utf8Sequence decode_utf8_before(std::string_view text, std::size_t end) {
  std::size_t start = end - 1;
  while (start > 0 && end - start < kMaxSequenceLength && is_continuation(text[start])) --start;
  const Utf8Sequence sequence = decode_utf8_at(text, start);
  if (sequence.well_formed && start + sequence.length == end) return sequence;
  return ill_formed(1);
}

std::optional<std::size_t> first_invalid_utf8_offset(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (static_cast<std::uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Sequence sequence = decode_utf8_at(text, i);
    if (!sequence.well_formed) return i;
    i += sequence.length;
  }
  return std::nullopt;
}

std::size_t count_utf8_code_points(std::string_view text) {
  std::size_t count = 0;
  for (const char c : text) {
    if (!is_continuation(c)) ++count;
  }
  return count;
}

std::string decode_utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Utf8Sequence sequence = decode_utf8_at(bytes, i);
    if (sequence.well_formed) {
      out.append(bytes.substr(i, sequence.length));
    } else {
      out.append(kReplacementCharacter);
    }
    i += sequence.length;
  }
  return out;
}

std::u32string decode_utf8_replace(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Utf8Sequence sequence = decode_utf8_at(bytes, i);
    out.push_back(sequence.code_point);  // U+FFFD when ill-formed
    i += sequence.length;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (const char32_t cp : code_points) append_utf8(out, cp);
  return out;
}

}  // namespace kvaudit
