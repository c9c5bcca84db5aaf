// GGUF tokenizer.ggml.* metadata -> BpeVocabulary (transformers' GGUF conversion).
#include "runners/model/tokenizer/gguf_tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "base/utf8.h"
#include "runners/model/model_error.h"
#include "runners/model/tokenizer/bpe_tokenizer.h"
#include "runners/model/tokenizer/byte_level.h"
#include "runners/model/tokenizer/message_text.h"
#include "runners/model/tokenizer/pretokenizer_patterns.h"

namespace kvaudit::model {
namespace {

constexpr std::int32_t kTokenTypeControl = 3;
constexpr std::int32_t kTokenTypeUserDefined = 4;

[[noreturn]] void fail_metadata(const GgufFile& file, std::string_view key,
                                const std::string& what) {
  throw ModelInputError(file.source() + ": metadata key '" + std::string(key) + "': " + what);
}

const GgufPreTokenizer& find_pre_tokenizer(const GgufFile& file, const std::string& name) {
  const auto& table = gguf_pre_tokenizers();
  const auto it = std::find_if(table.begin(), table.end(),
                               [&](const GgufPreTokenizer& p) { return p.name == name; });
  if (it != table.end()) return *it;
  std::string known;
  for (const GgufPreTokenizer& p : table)
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  fail_metadata(file, "tokenizer.ggml.pre",
                "unknown pre-tokenizer " + quote_for_message(name) + " (known: " + known + ")");
}

// A token id from an optional metadata key, checked against the token list.
std::optional<std::int32_t> optional_token_index(const GgufFile& file, std::string_view key,
                                                 std::size_t token_count) {
  const auto value = file.find_integer(key);
  if (!value) return std::nullopt;
  if (*value < 0 || static_cast<std::uint64_t>(*value) >= token_count) {
    fail_metadata(file, key,
                  "id " + std::to_string(*value) + " is outside the " +
                      std::to_string(token_count) + " tokens");
  }
  return static_cast<std::int32_t>(*value);
}

}  // namespace

BpeVocabulary gguf_bpe_vocabulary(const GgufFile& file) {
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model == "llama") {
    fail_metadata(file, "tokenizer.ggml.model",
                  "'llama' (a SentencePiece vocabulary) is not supported from GGUF; load the model "
                  "directory's tokenizer.model instead");
  }
  if (model != "gpt2") {
    fail_metadata(file, "tokenizer.ggml.model",
                  quote_for_message(model) + " is not supported (only 'gpt2', byte-level BPE)");
  }
  const std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (tokens.empty()) fail_metadata(file, "tokenizer.ggml.tokens", "the token list is empty");
  std::vector<std::int32_t> types;
  if (file.has("tokenizer.ggml.token_type")) {
    types = file.get_i32_array("tokenizer.ggml.token_type");
    if (types.size() != tokens.size()) {
      fail_metadata(file, "tokenizer.ggml.token_type",
                    std::to_string(types.size()) + " entries for " + std::to_string(tokens.size()) +
                        " tokens");
    }
  }
  if (!file.has("tokenizer.ggml.merges")) {
    fail_metadata(file, "tokenizer.ggml.merges",
                  "is missing (merges derived from scores are not supported)");
  }
  const std::vector<std::string> merges = file.get_string_array("tokenizer.ggml.merges");

  BpeVocabulary v;
  v.source = file.source();
  v.vocab_origin = "tokenizer.ggml.tokens";
  v.merges_origin = "tokenizer.ggml.merges";

  // Vocabulary: byte-level spelling -> last index with that spelling.
  std::unordered_map<std::string, std::int32_t> vocab;
  vocab.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (const auto bad = first_invalid_utf8_offset(tokens[i])) {
      fail_metadata(
          file, "tokenizer.ggml.tokens",
          "token " + std::to_string(i) + " is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
    }
    const std::string spelling =
        is_byte_level_spelling(tokens[i]) ? tokens[i] : to_byte_level(tokens[i]);
    vocab[spelling] = static_cast<std::int32_t>(i);
  }
  v.vocab.assign(vocab.begin(), vocab.end());
  std::sort(v.vocab.begin(), v.vocab.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });

  v.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string& line = merges[i];
    const std::size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      fail_metadata(file, "tokenizer.ggml.merges",
                    "entry " + std::to_string(i) + ", " + quote_for_message(line) +
                        ", is not two tokens separated by one space");
    }
    v.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }

  // Added tokens, in the order transformers adds them; a content already added keeps its flags.
  const auto add = [&](const std::string& content, bool special) {
    const auto in_vocab = vocab.find(content);
    if (in_vocab == vocab.end()) return;  // transformers would invent an id past the vocabulary
    const bool seen = std::any_of(v.added_tokens.begin(), v.added_tokens.end(),
                                  [&](const AddedToken& t) { return t.content == content; });
    if (seen) return;
    AddedToken token;
    token.content = content;
    token.id = in_vocab->second;
    token.special = special;
    v.added_tokens.push_back(std::move(token));
  };
  add("<|endoftext|>", true);  // GPT2Tokenizer's default unk/bos/eos token
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (types[i] == kTokenTypeControl && is_byte_level_spelling(tokens[i])) add(tokens[i], true);
  }
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (types[i] == kTokenTypeUserDefined) add(tokens[i], false);
  }
  const auto bos = optional_token_index(file, "tokenizer.ggml.bos_token_id", tokens.size());
  const auto eos = optional_token_index(file, "tokenizer.ggml.eos_token_id", tokens.size());
  const auto unk = optional_token_index(file, "tokenizer.ggml.unknown_token_id", tokens.size());
  const auto pad = optional_token_index(file, "tokenizer.ggml.padding_token_id", tokens.size());
  for (const auto& index : {bos, eos, unk, pad}) {
    if (index) add(tokens[static_cast<std::size_t>(*index)], true);
  }
  // The id transformers resolves a named special token to: its added token's id, else the index.
  const auto resolve = [&](std::optional<std::int32_t> index) -> std::optional<std::int32_t> {
    if (!index) return std::nullopt;
    const std::string& content = tokens[static_cast<std::size_t>(*index)];
    for (const AddedToken& t : v.added_tokens) {
      if (t.content == content) return t.id;
    }
    const auto in_vocab =
        vocab.find(is_byte_level_spelling(content) ? content : to_byte_level(content));
    if (in_vocab != vocab.end() && in_vocab->second == *index) return *index;
    return std::nullopt;
  };
  v.bos_id = resolve(bos);
  const auto eos_id = resolve(eos);
  if (eos_id) v.eos_ids.push_back(*eos_id);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (const auto id = resolve(optional_token_index(file, key, tokens.size()))) {
      if (std::find(v.eos_ids.begin(), v.eos_ids.end(), *id) == v.eos_ids.end())
        v.eos_ids.push_back(*id);
    }
  }
  if (file.find_bool("tokenizer.ggml.add_bos_token").value_or(false) && v.bos_id) {
    v.prefix_ids.push_back(*v.bos_id);
  }
  if (file.find_bool("tokenizer.ggml.add_eos_token").value_or(false) && eos_id) {
    v.suffix_ids.push_back(*eos_id);
  }

  const std::string pre = file.find_string("tokenizer.ggml.pre").value_or("default");
  const GgufPreTokenizer& pre_tokenizer = find_pre_tokenizer(file, pre);
  v.add_prefix_space = false;
  if (pre_tokenizer.split_pattern.empty()) {
    v.byte_level_regex = true;
  } else {
    v.byte_level_regex = false;
    v.splits.push_back({std::string(pre_tokenizer.split_pattern), false,
                        "metadata key 'tokenizer.ggml.pre' (" + pre + ")"});
  }
  return v;
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& path) {
  const GgufFile file = GgufFile::open(path);
  return std::make_unique<BpeTokenizer>(gguf_bpe_vocabulary(file));
}

}  // namespace kvaudit::model
