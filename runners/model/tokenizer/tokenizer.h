// Tokenizer: text <-> token ids with Hugging Face semantics, and load_tokenizer(), which picks the
// implementation from what a path holds.
//
//   * an HF model directory: tokenizer.json (byte-level BPE, bpe_tokenizer.h) if present, else
//     tokenizer.model (SentencePiece, sentencepiece_tokenizer.h); tokenizer_config.json and
//     generation_config.json next to it supply BOS/EOS and add_bos_token / add_eos_token as
//     transformers applies them;
//   * a tokenizer.json or tokenizer.model file (its directory's configs are read the same way);
//   * a .gguf file: its tokenizer.ggml.* metadata (gguf_tokenizer.h).
//
// encode(text, {add_special_tokens, parse_special}) returns what
// `tokenizer(text, add_special_tokens=..., split_special_tokens=not parse_special)["input_ids"]`
// returns in transformers; decode(ids, skip) what `tokenizer.decode(ids, skip_special_tokens=skip)`
// returns. Every implementation is immutable after loading and safe to use from several threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvaudit::model {

struct EncodeOptions {
  // Add what HF adds for add_special_tokens=True: the post-processor template's tokens
  // (tokenizer.json) or BOS/EOS per add_bos_token / add_eos_token.
  bool add_special_tokens = true;
  // Special-token literals in the text (e.g. "<|im_start|>") become their ids, HF's default.
  // false = transformers' split_special_tokens=True: they are tokenized as plain text.
  // Non-special added tokens are matched either way, as in HF.
  bool parse_special = true;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`, which must be valid UTF-8 (else ModelInputError naming the byte offset).
  std::vector<std::int32_t> encode(std::string_view text, EncodeOptions options = {}) const;

  // The text of `ids`. Ids that are no token are skipped, as HF does; bytes that do not form
  // valid UTF-8 become U+FFFD exactly as in HF.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const {
    return decode_ids(ids, skip_special_tokens);
  }

  // The id of a token spelled as in the vocabulary (byte-level symbols such as "Ġthe" for BPE,
  // "▁the" for SentencePiece, or an added token's content), or nullopt.
  virtual std::optional<std::int32_t> token_to_id(std::string_view token) const = 0;
  // The vocabulary spelling of `id`, or nullopt when `id` is no token.
  virtual std::optional<std::string> id_to_token(std::int32_t id) const = 0;
  // Rows an embedding table needs: the largest token id + 1 (added tokens included).
  virtual std::size_t vocab_size() const = 0;
  virtual std::optional<std::int32_t> bos_id() const = 0;
  // End-of-sequence ids: the tokenizer's EOS plus generation_config.json's eos_token_id list (HF
  // directories) or the GGUF's EOT/EOM ids, without duplicates, EOS first. May be empty.
  virtual const std::vector<std::int32_t>& eos_ids() const = 0;
  // True for special added tokens (those skip_special_tokens removes).
  virtual bool is_special(std::int32_t id) const = 0;
  // One line for logs and provenance, e.g. "byte-level BPE from /m/tokenizer.json (49152 ids)".
  virtual std::string description() const = 0;
  // The file it was read from (tokenizer.json, tokenizer.model or the .gguf).
  const std::string& file() const { return source(); }

 protected:
  // `text` is valid UTF-8 here.
  virtual std::vector<std::int32_t> encode_valid_utf8(std::string_view text,
                                                      EncodeOptions options) const = 0;
  virtual std::string decode_ids(std::span<const std::int32_t> ids,
                                 bool skip_special_tokens) const = 0;
  // Names the tokenizer's file in encode() errors.
  virtual const std::string& source() const = 0;
};

// Loads the tokenizer at `path` (see the top of this file). Throws ModelInputError naming the file,
// the field (JSON path or metadata key) and what is wrong.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& path);

// Refuses to pair `tokenizer` with a model whose embedding table has `model_vocab_size` rows
// (ModelConfig::vocab_size of the model at `model`) when the tokenizer can produce an id beyond it:
// throws ModelInputError naming the tokenizer's file, its largest id and the model's vocab_size.
// A tokenizer with fewer ids than the model is fine (padded embedding tables, e.g. Qwen2).
void require_tokenizer_fits_model(const Tokenizer& tokenizer, int model_vocab_size,
                                  const std::string& model);

}  // namespace kvaudit::model
