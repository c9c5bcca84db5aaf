// UTF-8 validation, iteration and lossy decoding (maximal-subpart U+FFFD substitution).
#include "runners/model/tokenizer/utf8.h"

#include <cstdint>

namespace kvaudit::model {
namespace {

// Length of the well-formed sequence that starts at `offset`, or the length of its maximal
// subpart (>= 1) negated when it is ill-formed. Table 3-7 of the Unicode standard.
int sequence_length(std::string_view text, std::size_t offset) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(offset);
  if (lead < 0x80) return 1;
  int length = 0;
  std::uint8_t second_low = 0x80;
  std::uint8_t second_high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_low = 0xA0;
    if (lead == 0xED) second_high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_low = 0x90;
    if (lead == 0xF4) second_high = 0x8F;
  } else {
    return -1;  // 0x80..0xC1, 0xF5..0xFF never start a sequence
  }
  for (int k = 1; k < length; ++k) {
    const std::size_t i = offset + static_cast<std::size_t>(k);
    if (i >= text.size()) return -k;
    const std::uint8_t b = byte(i);
    const std::uint8_t low = k == 1 ? second_low : std::uint8_t{0x80};
    const std::uint8_t high = k == 1 ? second_high : std::uint8_t{0xBF};
    if (b < low || b > high) return -k;
  }
  return length;
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8_offset(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (static_cast<std::uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const int length = sequence_length(text, i);
    if (length < 0) return i;
    i += static_cast<std::size_t>(length);
  }
  return std::nullopt;
}

std::string decode_utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const int length = sequence_length(bytes, i);
    if (length > 0) {
      out.append(bytes.substr(i, static_cast<std::size_t>(length)));
      i += static_cast<std::size_t>(length);
    } else {
      out.append(kReplacementCharacter);
      i += static_cast<std::size_t>(-length);
    }
  }
  return out;
}

std::size_t decode_code_point(std::string_view text, std::size_t offset, char32_t& code_point) {
  const auto b = [&](std::size_t k) {
    return static_cast<char32_t>(static_cast<std::uint8_t>(text[offset + k]));
  };
  const char32_t lead = b(0);
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  }
  if (lead < 0xE0) {
    code_point = ((lead & 0x1F) << 6) | (b(1) & 0x3F);
    return 2;
  }
  if (lead < 0xF0) {
    code_point = ((lead & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    return 3;
  }
  code_point = ((lead & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  return 4;
}

std::size_t decode_code_point_before(std::string_view text, std::size_t end, char32_t& code_point) {
  std::size_t start = end - 1;
  while (start > 0 && (static_cast<std::uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return decode_code_point(text, start, code_point);
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

}  // namespace kvaudit::model
