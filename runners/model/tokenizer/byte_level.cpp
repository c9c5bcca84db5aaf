// GPT-2 bytes_to_unicode tables, built once.
#include "runners/model/tokenizer/byte_level.h"

#include <array>

#include "runners/model/tokenizer/utf8.h"

namespace kvaudit::model {
namespace {

struct ByteLevelTables {
  // Every symbol is below U+0144, so the inverse is a direct table.
  static constexpr char32_t kInverseSize = 0x144;

  std::array<std::string, 256> symbol;               // byte -> UTF-8 of its code point
  std::array<std::int16_t, kInverseSize> inverse{};  // code point -> byte, or -1

  ByteLevelTables() {
    const auto printable = [](unsigned b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    inverse.fill(-1);
    char32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      const char32_t cp = printable(b) ? static_cast<char32_t>(b) : next++;
      append_utf8(symbol[b], cp);
      inverse[cp] = static_cast<std::int16_t>(b);
    }
  }

  std::optional<std::uint8_t> byte_of(char32_t cp) const {
    if (cp >= kInverseSize || inverse[cp] < 0) return std::nullopt;
    return static_cast<std::uint8_t>(inverse[cp]);
  }
};

const ByteLevelTables& tables() {
  static const ByteLevelTables instance;
  return instance;
}

}  // namespace

std::string_view byte_level_symbol(std::uint8_t byte) { return tables().symbol[byte]; }

std::optional<std::uint8_t> byte_level_byte(char32_t code_point) {
  return tables().byte_of(code_point);
}

std::string to_byte_level(std::string_view bytes) {
  const auto& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += t.symbol[static_cast<std::uint8_t>(c)];
  return out;
}

bool append_byte_level_bytes(std::string_view token, std::string& out) {
  const auto& t = tables();
  const std::size_t start = out.size();
  std::size_t i = 0;
  while (i < token.size()) {
    char32_t cp = 0;
    i += decode_code_point(token, i, cp);
    const auto byte = t.byte_of(cp);
    if (!byte) {
      out.resize(start);
      return false;
    }
    out.push_back(static_cast<char>(*byte));
  }
  return true;
}

bool is_byte_level_spelling(std::string_view token) {
  std::size_t i = 0;
  while (i < token.size()) {
    char32_t cp = 0;
    i += decode_code_point(token, i, cp);
    if (!tables().byte_of(cp)) return false;
  }
  return true;
}

}  // namespace kvaudit::model
