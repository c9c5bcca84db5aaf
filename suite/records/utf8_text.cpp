// Well-formedness check and repair of record strings, on base/utf8.h's decoder.
#include "suite/records/utf8_text.h"

#include <cstddef>

#include "base/utf8.h"

namespace kvaudit::records {

bool is_valid_utf8_without_nul(std::string_view text) {
  return text.find('\0') == std::string_view::npos && !first_invalid_utf8_offset(text);
}

std::string make_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Sequence sequence = decode_utf8_at(text, i);
    if (sequence.well_formed && sequence.code_point != U'\0') {
      out.append(text.substr(i, sequence.length));
      i += sequence.length;
    } else {
      out += kReplacementCharacter;  // this byte only: the next one is decoded afresh
      ++i;
    }
  }
  return out;
}

}  // namespace kvaudit::records
