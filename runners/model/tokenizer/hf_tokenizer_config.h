// The parts of an HF model directory's tokenizer_config.json and generation_config.json that
// transformers uses when it builds a tokenizer: special-token names, add_bos_token /
// add_eos_token (when present they make transformers rebuild the post-processor as
// "[BOS] $A [EOS]"), the SentencePiece options legacy and add_prefix_space, added_tokens_decoder,
// the chat_template source (a string, or the "default" entry of a list of {name, template}),
// and generation_config's eos_token_id (an id or a list of ids). Token names may be strings or
// AddedToken objects ({"content": ...}). Errors name the file and the JSON path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "runners/model/tokenizer/added_vocabulary.h"

namespace kvaudit::model {

struct HfTokenizerConfig {
  std::string source;  // the file, for messages
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  std::optional<bool> legacy;
  std::optional<bool> add_prefix_space;
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> unk_token;
  std::vector<AddedToken> added_tokens_decoder;  // in id order
  std::optional<std::string> chat_template;      // Jinja source; never executed
};

// `directory`/tokenizer_config.json, or nullopt when the file does not exist.
std::optional<HfTokenizerConfig> read_hf_tokenizer_config(const std::filesystem::path& directory);

// `directory`/generation_config.json's eos_token_id as a list; empty when the file or the key is
// absent or null.
std::vector<std::int32_t> read_generation_eos_ids(const std::filesystem::path& directory);

}  // namespace kvaudit::model
