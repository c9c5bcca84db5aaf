// Tokenizer::encode's input check, shared by every implementation, and the check that a tokenizer
// fits the embedding table of the model it is paired with.
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

void require_tokenizer_fits_model(const Tokenizer& tokenizer, int model_vocab_size,
                                  const std::string& model) {
  const std::size_t ids = tokenizer.vocab_size();
  if (ids == 0 || ids <= static_cast<std::size_t>(model_vocab_size)) return;
  throw ModelInputError(tokenizer.file() + ": the tokenizer's largest token id is " +
                        std::to_string(ids - 1) + " but the model " + model + " has vocab_size " +
                        std::to_string(model_vocab_size) + " (ids 0.." +
                        std::to_string(model_vocab_size - 1) +
                        "); this tokenizer does not belong to this model");
}

}  // namespace kvaudit::model
