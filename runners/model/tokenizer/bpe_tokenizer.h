// Byte-level BPE tokenizer (GPT-2, SmolLM, Llama-3, Qwen2 families) with HF tokenizers semantics.
//
// encode: added tokens are cut out (added_vocabulary.h); each remaining stretch is NFC-normalized
// when the vocabulary says so, split by each Isolated split stage in turn (PCRE2,
// pretokenizer_regex.h), then by ByteLevel: a ' ' is prepended to every piece that does not start
// with one when add_prefix_space is set, and with use_regex the GPT-2 pattern
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ splits again. Each
// piece's bytes become byte-level symbols (byte_level.h) and are merged by rank (bpe_merges.h);
// with ignore_merges a piece found whole in the vocabulary is one token. Merged words are cached.
//
// decode: each id becomes its spelling (added tokens: content, or NFC form when normalized),
// specials dropped on request, unknown ids skipped; a spelling made only of byte-level symbols
// becomes its bytes, any other keeps its UTF-8 (HF's ByteLevel decoder); the bytes are decoded
// lossily.
#pragma once

#include <array>
#include <mutex>
#include <unordered_map>

#include "runners/model/tokenizer/bpe_merges.h"
#include "runners/model/tokenizer/bpe_vocabulary.h"
#include "runners/model/tokenizer/pretokenizer_regex.h"
#include "runners/model/tokenizer/tokenizer.h"

namespace kvaudit::model {

// GPT-2's pre-tokenizer pattern (HF ByteLevel use_regex=true).
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class BpeTokenizer final : public Tokenizer {
 public:
  // Validates `vocabulary` (ids non-negative and dense enough, spellings and ids distinct, merges
  // made of vocabulary tokens whose concatenation is a token, template and BOS/EOS ids that are
  // tokens) and builds the tables. Throws ModelInputError naming vocabulary.source and the field.
  explicit BpeTokenizer(BpeVocabulary vocabulary);

  std::optional<std::int32_t> token_to_id(std::string_view token) const override;
  std::optional<std::string> id_to_token(std::int32_t id) const override;
  std::size_t vocab_size() const override { return id_to_spelling_.size(); }
  std::optional<std::int32_t> bos_id() const override { return bos_id_; }
  const std::vector<std::int32_t>& eos_ids() const override { return eos_ids_; }
  bool is_special(std::int32_t id) const override;
  std::string description() const override;

 protected:
  std::vector<std::int32_t> encode_valid_utf8(std::string_view text,
                                              EncodeOptions options) const override;
  std::string decode_ids(std::span<const std::int32_t> ids,
                         bool skip_special_tokens) const override;
  const std::string& source() const override { return source_; }

 private:
  void encode_plain(std::string_view text, std::vector<std::int32_t>& out) const;
  void encode_piece(std::string_view bytes, std::vector<std::int32_t>& out) const;

  std::string source_;
  std::unordered_map<std::string, std::int32_t> model_ids_;  // byte-level spelling -> id
  std::vector<std::string> id_to_spelling_;                  // model tokens ("" if none)
  std::vector<bool> has_model_token_;
  std::array<std::int32_t, 256> byte_ids_{};  // id of each byte's symbol, -1 if absent
  BpeMergeTable merges_;
  AddedVocabulary added_;
  std::vector<PretokenizerRegex> splits_;
  std::optional<PretokenizerRegex> byte_level_split_;
  bool add_prefix_space_ = false;
  bool ignore_merges_ = false;
  std::int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  std::vector<std::int32_t> prefix_ids_;
  std::vector<std::int32_t> suffix_ids_;
  std::optional<std::int32_t> bos_id_;
  std::vector<std::int32_t> eos_ids_;

  // Word cache: piece bytes -> ids (bounded; cleared when full).
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>> cache_;
};

}  // namespace kvaudit::model
