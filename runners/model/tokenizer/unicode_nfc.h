// Unicode Normalization Form C (canonical decomposition, then canonical composition) through
// libutf8proc, as HF tokenizers' NFC normalizer (Qwen2's tokenizer.json) applies it.
#pragma once

#include <string>
#include <string_view>

namespace kvaudit::model {

// NFC of valid UTF-8 `text`. Pure ASCII is returned unchanged without calling utf8proc.
std::string to_nfc(std::string_view text);

}  // namespace kvaudit::model
