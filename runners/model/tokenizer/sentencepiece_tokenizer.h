// SentencePiece BPE tokenizer (Llama-2, Mistral) through libsentencepiece, with the semantics of
// transformers 5's LlamaTokenizer (== LlamaTokenizerFast, tokenizers backend):
//
//   * added tokens: every CONTROL and UNKNOWN piece is a special added token (<unk>, <s>, </s>,
//     [INST], ...), every USER_DEFINED piece a non-special one; tokenizer_config.json's
//     added_tokens_decoder may change their flags. They are cut out first (added_vocabulary.h).
//   * each remaining piece: ' ' -> U+2581 ("▁"), then a "▁" is prepended unless the piece
//     already starts with one: to every piece when legacy=true (Metaspace prepend_scheme
//     "always"), only to a piece at the very start of the text when legacy=false ("first", the
//     default), never when add_prefix_space=false. No other normalization (HF's converted
//     tokenizer has none). libsentencepiece then does the BPE and the byte fallback, on a copy of
//     the model whose normalizer is identity (sentencepiece_model_proto.h).
//   * add_special_tokens: BOS when add_bos_token (default false, as transformers 5 without a
//     config), EOS when add_eos_token.
//   * decode (HF decoder Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)]): "▁"
//     becomes ' '; a run of <0xNN> pieces becomes its bytes if they are valid UTF-8, otherwise one
//     U+FFFD per byte; then one leading ' ' is dropped (when add_prefix_space).
//
// Raw libsentencepiece ids differ from these where HF adds no "▁" (after an added token, or before
// text that starts with a space); tests/golden/tokenizers/expectations.json records both.
// Only BPE models are accepted (trainer_spec.model_type 2), and not treat_whitespace_as_suffix.
#pragma once

#include <filesystem>
#include <memory>
#include <unordered_map>

#include "runners/model/tokenizer/added_vocabulary.h"
#include "runners/model/tokenizer/hf_tokenizer_config.h"
#include "runners/model/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace kvaudit::model {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // `model_bytes`: the tokenizer.model file; `source` names it in messages. `config` comes from
  // tokenizer_config.json (nullopt: transformers' defaults); `extra_eos_ids` from
  // generation_config.json. Throws ModelInputError.
  SentencePieceTokenizer(std::string_view model_bytes, std::string source,
                         const std::optional<HfTokenizerConfig>& config,
                         const std::vector<std::int32_t>& extra_eos_ids);
  ~SentencePieceTokenizer() override;

  // Reads `path` (a tokenizer.model) and the configs in its directory.
  static std::unique_ptr<SentencePieceTokenizer> load(const std::filesystem::path& path);

  std::optional<std::int32_t> token_to_id(std::string_view token) const override;
  std::optional<std::string> id_to_token(std::int32_t id) const override;
  std::size_t vocab_size() const override { return pieces_.size(); }
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
  enum class Prepend { kAlways, kFirst, kNever };

  std::string source_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::vector<std::string> pieces_;
  std::unordered_map<std::string, std::int32_t> piece_ids_;
  AddedVocabulary added_;
  Prepend prepend_ = Prepend::kFirst;
  bool strip_leading_space_ = true;
  bool add_bos_ = false;
  bool add_eos_ = false;
  std::optional<std::int32_t> bos_id_;
  std::optional<std::int32_t> eos_id_;
  std::vector<std::int32_t> eos_ids_;
};

}  // namespace kvaudit::model
