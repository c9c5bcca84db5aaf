// GPT-2's byte-level alphabet (`bytes_to_unicode` in openai/gpt-2 encoder.py, HF tokenizers
// pre_tokenizers/byte_level.rs): every byte gets a printable code point so that any text becomes a
// string of 256 possible symbols. The printable Latin-1 bytes '!'..'~', U+00A1..U+00AC and
// U+00AE..U+00FF map to themselves; the other 68 bytes, in increasing order, map to U+0100 + n
// (so ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ').
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvaudit::model {

// The symbol of `byte`, UTF-8 encoded (1 or 2 bytes).
std::string_view byte_level_symbol(std::uint8_t byte);

// The byte whose symbol is `code_point`, or nullopt when it is outside the alphabet.
std::optional<std::uint8_t> byte_level_byte(char32_t code_point);

// Every byte of `bytes` replaced by its symbol.
std::string to_byte_level(std::string_view bytes);

// If every character of `token` (valid UTF-8) is in the alphabet, appends the bytes they stand
// for to `out` and returns true; otherwise leaves `out` alone and returns false (HF's ByteLevel
// decoder then keeps the token's own UTF-8 bytes).
bool append_byte_level_bytes(std::string_view token, std::string& out);

// True when every character of `token` (valid UTF-8) is in the alphabet.
bool is_byte_level_spelling(std::string_view token);

}  // namespace kvaudit::model
