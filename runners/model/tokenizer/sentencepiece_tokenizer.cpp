// SentencePieceTokenizer: HF LlamaTokenizer semantics on top of libsentencepiece's BPE.
#include "runners/model/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>

#include "base/utf8.h"
#include "runners/model/formats/mapped_file.h"
#include "runners/model/model_error.h"
#include "runners/model/tokenizer/message_text.h"
#include "runners/model/tokenizer/sentencepiece_model_proto.h"

namespace kvaudit::model {
namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

std::string model_type_name(std::int64_t type) {
  switch (type) {
    case 1:
      return "UNIGRAM";
    case 2:
      return "BPE";
    case 3:
      return "WORD";
    case 4:
      return "CHAR";
    default:
      return std::to_string(type);
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// HF ByteFallback: a 6-byte token "<0x..>" whose two characters parse as a base-16 u8 (Rust
// u8::from_str_radix, which also takes a leading '+').
std::optional<std::uint8_t> byte_token_value(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
  const char a = token[3];
  const char b = token[4];
  if (a == '+' && hex_value(b) >= 0) return static_cast<std::uint8_t>(hex_value(b));
  if (hex_value(a) < 0 || hex_value(b) < 0) return std::nullopt;
  return static_cast<std::uint8_t>(hex_value(a) * 16 + hex_value(b));
}

std::string replace_spaces_with_metaspace(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (const char c : text) {
    if (c == ' ') {
      out += kMetaspace;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::string_view model_bytes, std::string source,
                                               const std::optional<HfTokenizerConfig>& config,
                                               const std::vector<std::int32_t>& extra_eos_ids)
    : source_(std::move(source)) {
  SentencePieceModelSummary summary = prepare_sentencepiece_model(model_bytes, source_);
  if (summary.model_type != 2) {
    throw ModelInputError(
        source_ + ": trainer_spec.model_type: " + model_type_name(summary.model_type) +
        " is not supported (only BPE SentencePiece models, as Llama and Mistral use)");
  }
  if (summary.treat_whitespace_as_suffix) {
    throw ModelInputError(source_ +
                          ": trainer_spec.treat_whitespace_as_suffix: true is not supported");
  }
  processor_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = processor_->LoadFromSerializedProto(summary.identity_normalizer_model);
  if (!status.ok()) {
    throw ModelInputError(source_ + ": libsentencepiece rejects the model: " + status.ToString());
  }
  if (static_cast<std::size_t>(processor_->GetPieceSize()) != summary.pieces.size()) {
    throw ModelInputError(source_ + ": libsentencepiece reports " +
                          std::to_string(processor_->GetPieceSize()) + " pieces, the file has " +
                          std::to_string(summary.pieces.size()));
  }

  std::vector<AddedToken> added;
  pieces_.reserve(summary.pieces.size());
  for (std::size_t id = 0; id < summary.pieces.size(); ++id) {
    SentencePieceEntry& entry = summary.pieces[id];
    if (first_invalid_utf8_offset(entry.piece)) {
      throw ModelInputError(source_ + ": ModelProto.pieces[" + std::to_string(id) +
                            "].piece is not valid UTF-8");
    }
    piece_ids_.emplace(entry.piece, static_cast<std::int32_t>(id));
    const bool special =
        entry.type == SentencePieceType::kControl || entry.type == SentencePieceType::kUnknown;
    if ((special || entry.type == SentencePieceType::kUserDefined) && !entry.piece.empty()) {
      AddedToken token;
      token.content = entry.piece;
      token.id = static_cast<std::int32_t>(id);
      token.special = special;
      added.push_back(std::move(token));
    }
    pieces_.push_back(std::move(entry.piece));
  }
  if (config) {
    for (const AddedToken& entry : config->added_tokens_decoder) {
      const std::string field =
          config->source + ": added_tokens_decoder." + quote_for_message(std::to_string(entry.id));
      if (static_cast<std::size_t>(entry.id) >= pieces_.size()) {
        throw ModelInputError(field + ": id is past the SentencePiece vocabulary (" +
                              std::to_string(pieces_.size()) + " pieces in " + source_ + ")");
      }
      if (entry.content != pieces_[static_cast<std::size_t>(entry.id)]) {
        throw ModelInputError(field + ": content " + quote_for_message(entry.content) +
                              " differs from the piece with that id, " +
                              quote_for_message(pieces_[static_cast<std::size_t>(entry.id)]));
      }
      if (entry.content.empty()) throw ModelInputError(field + ": content is empty");
      const auto it = std::find_if(added.begin(), added.end(),
                                   [&](const AddedToken& t) { return t.id == entry.id; });
      if (it == added.end()) {
        added.push_back(entry);
      } else {
        *it = entry;
      }
    }
  }
  std::sort(added.begin(), added.end(),
            [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  // Two pieces with one content cannot both be added tokens; keep the first, as HF's map does.
  std::vector<AddedToken> unique;
  for (AddedToken& t : added) {
    const bool seen = std::any_of(unique.begin(), unique.end(),
                                  [&](const AddedToken& u) { return u.content == t.content; });
    if (!seen) unique.push_back(std::move(t));
  }
  added_ = AddedVocabulary(std::move(unique), /*nfc=*/false);

  const bool legacy = config && config->legacy.value_or(false);
  const bool add_prefix_space = !config || config->add_prefix_space.value_or(true);
  prepend_ = !add_prefix_space ? Prepend::kNever : legacy ? Prepend::kAlways : Prepend::kFirst;
  strip_leading_space_ = add_prefix_space;
  const std::string bos_name = config && config->bos_token ? *config->bos_token : "<s>";
  const std::string eos_name = config && config->eos_token ? *config->eos_token : "</s>";
  bos_id_ = token_to_id(bos_name);
  eos_id_ = token_to_id(eos_name);
  add_bos_ = config && config->add_bos_token.value_or(false) && bos_id_.has_value();
  add_eos_ = config && config->add_eos_token.value_or(false) && eos_id_.has_value();
  if (eos_id_) eos_ids_.push_back(*eos_id_);
  for (const std::int32_t id : extra_eos_ids) {
    if (static_cast<std::size_t>(id) >= pieces_.size()) {
      throw ModelInputError(source_ + ": generation_config.json eos_token_id " +
                            std::to_string(id) + " is past the vocabulary (" +
                            std::to_string(pieces_.size()) + " pieces)");
    }
    if (std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) eos_ids_.push_back(id);
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::load(
    const std::filesystem::path& path) {
  const MappedFile file(path);
  const auto bytes = file.bytes();
  const std::filesystem::path directory = path.parent_path();
  return std::make_unique<SentencePieceTokenizer>(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string(),
      read_hf_tokenizer_config(directory), read_generation_eos_ids(directory));
}

std::optional<std::int32_t> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* t = added_.find_content(token)) return t->id;
  const auto it = piece_ids_.find(std::string(token));
  if (it == piece_ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> SentencePieceTokenizer::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= pieces_.size()) return std::nullopt;
  return pieces_[static_cast<std::size_t>(id)];
}

bool SentencePieceTokenizer::is_special(std::int32_t id) const {
  const AddedToken* t = added_.find_id(id);
  return t != nullptr && t->special;
}

std::string SentencePieceTokenizer::description() const {
  const char* scheme = prepend_ == Prepend::kAlways  ? "always"
                       : prepend_ == Prepend::kFirst ? "first"
                                                     : "never";
  return "SentencePiece BPE from " + source_ + " (" + std::to_string(pieces_.size()) +
         " pieces, prefix space: " + scheme + ", add_bos_token=" + (add_bos_ ? "true" : "false") +
         ")";
}

std::vector<std::int32_t> SentencePieceTokenizer::encode_valid_utf8(std::string_view text,
                                                                    EncodeOptions options) const {
  std::vector<std::int32_t> ids;
  if (options.add_special_tokens && add_bos_) ids.push_back(*bos_id_);
  std::vector<int> piece_ids;
  for (const TextSegment& segment : added_.split(text, options.parse_special)) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
      continue;
    }
    std::string normalized = replace_spaces_with_metaspace(segment.text);
    const bool prepend =
        prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && segment.at_input_start);
    if (prepend && !normalized.starts_with(kMetaspace)) normalized.insert(0, kMetaspace);
    const auto status = processor_->Encode(normalized, &piece_ids);
    if (!status.ok()) {
      throw ModelInputError(source_ +
                            ": libsentencepiece could not encode the text: " + status.ToString());
    }
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  }
  if (options.add_special_tokens && add_eos_) ids.push_back(*eos_id_);
  return ids;
}

std::string SentencePieceTokenizer::decode_ids(std::span<const std::int32_t> ids,
                                               bool skip_special_tokens) const {
  std::string out;
  std::string pending_bytes;  // a run of <0xNN> tokens
  const auto flush = [&] {
    if (pending_bytes.empty()) return;
    if (first_invalid_utf8_offset(pending_bytes)) {
      for (std::size_t i = 0; i < pending_bytes.size(); ++i) out += kReplacementCharacter;
    } else {
      out += pending_bytes;
    }
    pending_bytes.clear();
  };
  for (const std::int32_t id : ids) {
    const std::string* token = nullptr;
    if (const AddedToken* t = added_.find_id(id)) {
      if (skip_special_tokens && t->special) continue;
      token = &t->content;
    } else if (id >= 0 && static_cast<std::size_t>(id) < pieces_.size()) {
      token = &pieces_[static_cast<std::size_t>(id)];
    } else {
      continue;  // no such token: HF skips it
    }
    if (const auto byte = byte_token_value(*token)) {
      pending_bytes.push_back(static_cast<char>(*byte));
      continue;
    }
    flush();
    std::size_t start = 0;
    while (true) {
      const std::size_t hit = token->find(kMetaspace, start);
      out.append(*token, start, hit == std::string::npos ? std::string::npos : hit - start);
      if (hit == std::string::npos) break;
      out += ' ';
      start = hit + kMetaspace.size();
    }
  }
  flush();
  if (strip_leading_space_ && out.starts_with(' ')) out.erase(0, 1);
  return out;
}

}  // namespace kvaudit::model
