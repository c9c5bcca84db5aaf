// Tokenizer::encode's input check, shared by every implementation.
#include "runners/model/tokenizer/tokenizer.h"

#include "base/utf8.h"
#include "runners/model/model_error.h"

namespace kvaudit::model {

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, EncodeOptions options) const {
  if (const auto bad = first_invalid_utf8_offset(text)) {
    throw ModelInputError(source() + ": text to encode is not valid UTF-8 (byte " +
                          std::to_string(*bad) + " of " + std::to_string(text.size()) + ")");
  }
  return encode_valid_utf8(text, options);
}

}  // namespace kvaudit::model
