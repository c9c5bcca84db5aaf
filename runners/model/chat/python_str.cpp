// Python `str` semantics over UTF-8 bytes: strip() and the str.isspace() set. See python_str.h.
#include "runners/model/chat/python_str.h"

namespace kvaudit::model {

bool python_isspace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string_view python_strip(std::string_view text) {
  std::size_t begin = 0;
  while (begin < text.size()) {
    const Utf8Sequence s = decode_utf8_at(text, begin);
    if (!s.well_formed || !python_isspace(s.code_point)) break;
    begin += s.length;
  }
  std::size_t end = text.size();
  while (end > begin) {
    const Utf8Sequence s = decode_utf8_before(text, end);
    if (!s.well_formed || !python_isspace(s.code_point)) break;
    end -= s.length;
  }
  return text.substr(begin, end - begin);
}

}  // namespace kvaudit::model
