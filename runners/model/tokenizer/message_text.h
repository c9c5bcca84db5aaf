// Quoting untrusted strings (token spellings, JSON keys) for error messages: control characters
// and invalid UTF-8 bytes are shown as \xNN, and long strings are cut, so a message stays one
// readable line whatever the file holds.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvaudit::model {

// "'text'" with escapes, at most `max_bytes` of the input shown (then "...").
std::string quote_for_message(std::string_view text, std::size_t max_bytes = 80);

}  // namespace kvaudit::model
