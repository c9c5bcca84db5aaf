// NFC via utf8proc_map(UTF8PROC_STABLE | UTF8PROC_COMPOSE).
#include "runners/model/tokenizer/unicode_nfc.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <stdexcept>

namespace kvaudit::model {

std::string to_nfc(std::string_view text) {
  const bool ascii = std::all_of(text.begin(), text.end(),
                                 [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (ascii) return std::string(text);
  utf8proc_uint8_t* raw = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &raw,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(raw, &std::free);
  if (length < 0) {
    // Callers validate UTF-8 first, so this is an internal error (e.g. out of memory).
    throw std::runtime_error(std::string("utf8proc NFC failed: ") + utf8proc_errmsg(length));
  }
  return std::string(reinterpret_cast<const char*>(raw), static_cast<std::size_t>(length));
}

}  // namespace kvaudit::model
