// Escaped, length-limited quoting for error messages.
#include "runners/model/tokenizer/message_text.h"

#include <cstdio>

#include "runners/model/tokenizer/utf8.h"

namespace kvaudit::model {

std::string quote_for_message(std::string_view text, std::size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  std::string_view shown = cut ? text.substr(0, max_bytes) : text;
  std::string out = "'";
  std::size_t i = 0;
  while (i < shown.size()) {
    const auto byte = static_cast<unsigned char>(shown[i]);
    const auto bad = first_invalid_utf8_offset(shown.substr(i, byte < 0x80 ? 1 : 4));
    if (byte >= 0x20 && byte != 0x7F && byte != '\\' && byte != '\'' && byte < 0x80) {
      out.push_back(static_cast<char>(byte));
      ++i;
    } else if (byte >= 0x80 && (!bad || *bad > 0)) {
      char32_t cp = 0;
      const std::size_t length = decode_code_point(shown, i, cp);
      out.append(shown.substr(i, length));
      i += length;
    } else {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\x%02X", byte);
      out += buffer;
      ++i;
    }
  }
  out += cut ? "'..." : "'";
  return out;
}

}  // namespace kvaudit::model
