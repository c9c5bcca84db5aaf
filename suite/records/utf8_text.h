// UTF-8 validity for record strings: h5py decodes our strings as UTF-8, and a C string ends at NUL.
//
// Model outputs can end in the middle of a multi-byte character (generation stopped at a token that
// holds half of one), so the shard writer stores make_valid_utf8(text): every byte that is not part
// of a well-formed UTF-8 sequence, and every NUL byte, becomes U+FFFD. Valid text is unchanged.
// The replacement is per byte, not per maximal subpart as in base/utf8.h's decode_utf8_lossy:
// "\xE2\x82" (a cut euro sign) becomes two U+FFFD here and one there.
#pragma once

#include <string>
#include <string_view>

namespace kvaudit::records {

// True if `text` is well-formed UTF-8 (no overlong forms, surrogates or code points above
// U+10FFFF) and holds no NUL byte.
bool is_valid_utf8_without_nul(std::string_view text);

// `text` with each byte outside a well-formed sequence, and each NUL, replaced by U+FFFD.
std::string make_valid_utf8(std::string_view text);

}  // namespace kvaudit::records
