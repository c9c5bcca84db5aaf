// BpeVocabulary: everything a byte-level BPE tokenizer is made of, as plain data. The
// tokenizer.json loader (tokenizer_json.h) and the GGUF loader (gguf_tokenizer.h) both fill it;
// BpeTokenizer (bpe_tokenizer.h) validates it and builds the runtime tables.
//
// Encoding pipeline (HF tokenizers, see bpe_tokenizer.h for the details):
//   added tokens cut out -> NFC (if `nfc`) -> `splits` in order -> ByteLevel (optional prefix
//   space, optional GPT-2 regex split, bytes -> symbols) -> BPE merges -> ids;
//   add_special_tokens wraps the result in `prefix_ids` ... `suffix_ids`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runners/model/tokenizer/added_vocabulary.h"

namespace kvaudit::model {

// One Isolated split stage before ByteLevel (HF Split with behavior Isolated, or Digits).
struct SplitPattern {
  std::string pattern;
  bool literal = false;  // a plain string, not a regex
  std::string origin;    // file and field, for messages
};

struct BpeVocabulary {
  std::string source;        // the file, for messages
  std::string vocab_origin;  // e.g. "model.vocab" or "metadata key 'tokenizer.ggml.tokens'"
  std::string merges_origin;

  // Model vocabulary: byte-level spelling -> id. Spellings are distinct, ids are distinct.
  std::vector<std::pair<std::string, std::int32_t>> vocab;
  // Merges in rank order (index = rank): the two spellings that merge.
  std::vector<std::pair<std::string, std::string>> merges;
  // Added tokens; their ids are model ids (content found in `vocab`) or ids past the vocabulary.
  std::vector<AddedToken> added_tokens;

  bool nfc = false;                  // normalizer: NFC
  std::vector<SplitPattern> splits;  // split stages before ByteLevel
  bool add_prefix_space = false;     // ByteLevel: prepend ' ' to each piece not starting with one
  bool byte_level_regex = true;      // ByteLevel use_regex: split with the GPT-2 pattern
  bool ignore_merges = false;        // a piece found whole in `vocab` is emitted directly
  std::optional<std::string> unk_token;  // for characters without a symbol (never for bytes)
  bool fuse_unk = false;

  std::vector<std::int32_t> prefix_ids;  // add_special_tokens: before the text
  std::vector<std::int32_t> suffix_ids;  // add_special_tokens: after the text
  std::optional<std::int32_t> bos_id;
  std::vector<std::int32_t> eos_ids;
};

}  // namespace kvaudit::model
