// load_tokenizer: HF directory / tokenizer.json / tokenizer.model / .gguf dispatch, and the
// tokenizer_config.json + generation_config.json overlay for tokenizer.json (transformers 5's
// TokenizersBackend: explicit add_bos_token / add_eos_token rebuild the template as
// "[BOS] $A [EOS]").
#include <algorithm>

#include "runners/model/model_error.h"
#include "runners/model/tokenizer/bpe_tokenizer.h"
#include "runners/model/tokenizer/gguf_tokenizer.h"
#include "runners/model/tokenizer/hf_tokenizer_config.h"
#include "runners/model/tokenizer/message_text.h"
#include "runners/model/tokenizer/sentencepiece_tokenizer.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "runners/model/tokenizer/tokenizer_json.h"

namespace kvaudit::model {
namespace {

std::optional<std::int32_t> find_token(const BpeVocabulary& v, std::string_view content) {
  for (const AddedToken& t : v.added_tokens) {
    if (t.content == content) return t.id;
  }
  for (const auto& [spelling, id] : v.vocab) {
    if (spelling == content) return id;
  }
  return std::nullopt;
}

void apply_configs(BpeVocabulary& v, const std::optional<HfTokenizerConfig>& config,
                   const std::vector<std::int32_t>& generation_eos_ids) {
  if (config) {
    const auto resolve = [&](const std::optional<std::string>& name,
                             const char* key) -> std::optional<std::int32_t> {
      if (!name) return std::nullopt;
      const auto id = find_token(v, *name);
      if (!id) {
        throw ModelInputError(config->source + ": " + key + ": " + quote_for_message(*name) +
                              " is not a token of " + v.source);
      }
      return id;
    };
    const auto bos = resolve(config->bos_token, "bos_token");
    const auto eos = resolve(config->eos_token, "eos_token");
    if (bos) v.bos_id = bos;
    if (eos) v.eos_ids = {*eos};
    if (config->add_bos_token || config->add_eos_token) {
      v.prefix_ids.clear();
      v.suffix_ids.clear();
      if (config->add_bos_token.value_or(false) && bos) v.prefix_ids.push_back(*bos);
      if (config->add_eos_token.value_or(false) && eos) v.suffix_ids.push_back(*eos);
    }
  }
  for (const std::int32_t id : generation_eos_ids) {
    if (std::find(v.eos_ids.begin(), v.eos_ids.end(), id) == v.eos_ids.end()) {
      v.eos_ids.push_back(id);
    }
  }
}

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::filesystem::path& path) {
  const std::filesystem::path directory = path.parent_path();
  BpeVocabulary v = read_tokenizer_json(path);
  apply_configs(v, read_hf_tokenizer_config(directory), read_generation_eos_ids(directory));
  return std::make_unique<BpeTokenizer>(std::move(v));
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw ModelInputError(path.string() +
                          ": no such file or directory (expected an HF model "
                          "directory, tokenizer.json, tokenizer.model or a .gguf file)");
  }
  if (std::filesystem::is_directory(status)) {
    if (std::filesystem::exists(path / "tokenizer.json", ec))
      return load_tokenizer_json(path / "tokenizer.json");
    if (std::filesystem::exists(path / "tokenizer.model", ec)) {
      return SentencePieceTokenizer::load(path / "tokenizer.model");
    }
    throw ModelInputError(path.string() +
                          ": the directory has neither tokenizer.json nor tokenizer.model");
  }
  const std::string extension = path.extension().string();
  if (extension == ".gguf") return load_gguf_tokenizer(path);
  if (extension == ".json") return load_tokenizer_json(path);
  if (extension == ".model") return SentencePieceTokenizer::load(path);
  throw ModelInputError(path.string() +
                        ": not a tokenizer (expected an HF model directory, a "
                        ".json tokenizer, a .model SentencePiece file or a .gguf file)");
}

}  // namespace kvaudit::model
