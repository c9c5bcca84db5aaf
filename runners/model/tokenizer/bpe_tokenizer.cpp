// BpeTokenizer: validation of a BpeVocabulary, HF-faithful encode/decode, and the word cache.
#include "runners/model/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <unordered_set>

#include "base/utf8.h"
#include "runners/model/model_error.h"
#include "runners/model/tokenizer/byte_level.h"
#include "runners/model/tokenizer/message_text.h"

namespace kvaudit::model {
namespace {

constexpr std::int64_t kMaxTokenId = (std::int64_t{1} << 24) - 1;
constexpr std::size_t kCacheEntries = std::size_t{1} << 16;
constexpr std::size_t kCacheMaxPieceBytes = 256;

}  // namespace

BpeTokenizer::BpeTokenizer(BpeVocabulary v) : source_(std::move(v.source)) {
  const auto fail = [this](const std::string& field, const std::string& what) {
    throw ModelInputError(source_ + ": " + field + ": " + what);
  };
  if (v.vocab.empty()) fail(v.vocab_origin, "the vocabulary is empty");

  // ---- ids ----
  std::int64_t max_id = -1;
  const auto check_id = [&](std::int64_t id, const std::string& field, std::string_view what) {
    if (id < 0 || id > kMaxTokenId) {
      fail(field, std::string(what) + " has id " + std::to_string(id) + ", outside [0, " +
                      std::to_string(kMaxTokenId) + "]");
    }
    max_id = std::max(max_id, id);
  };
  for (const auto& [spelling, id] : v.vocab)
    check_id(id, v.vocab_origin, "token " + quote_for_message(spelling));
  for (const AddedToken& t : v.added_tokens)
    check_id(t.id, "added tokens", "added token " + quote_for_message(t.content));
  const std::size_t entries = v.vocab.size() + v.added_tokens.size();
  if (static_cast<std::size_t>(max_id) + 1 > 2 * entries + 1024) {
    fail(v.vocab_origin, "token ids are too sparse: largest id " + std::to_string(max_id) +
                             " for " + std::to_string(entries) + " tokens");
  }
  const auto size = static_cast<std::size_t>(max_id) + 1;
  id_to_spelling_.resize(size);
  has_model_token_.assign(size, false);
  model_ids_.reserve(v.vocab.size());
  for (const auto& [spelling, id] : v.vocab) {
    const auto index = static_cast<std::size_t>(id);
    if (has_model_token_[index]) {
      fail(v.vocab_origin, "id " + std::to_string(id) + " is used by both " +
                               quote_for_message(id_to_spelling_[index]) + " and " +
                               quote_for_message(spelling));
    }
    if (!model_ids_.emplace(spelling, id).second) {
      fail(v.vocab_origin, "token " + quote_for_message(spelling) + " appears twice");
    }
    has_model_token_[index] = true;
    id_to_spelling_[index] = spelling;
  }

  // ---- merges ----
  std::string merged;
  for (std::size_t rank = 0; rank < v.merges.size(); ++rank) {
    const auto& [left, right] = v.merges[rank];
    const std::string field = v.merges_origin + "[" + std::to_string(rank) + "]";
    const auto l = model_ids_.find(left);
    if (l == model_ids_.end()) fail(field, quote_for_message(left) + " is not in the vocabulary");
    const auto r = model_ids_.find(right);
    if (r == model_ids_.end()) fail(field, quote_for_message(right) + " is not in the vocabulary");
    merged.assign(left).append(right);
    const auto m = model_ids_.find(merged);
    if (m == model_ids_.end()) {
      fail(field, "the merge of " + quote_for_message(left) + " and " + quote_for_message(right) +
                      ", " + quote_for_message(merged) + ", is not in the vocabulary");
    }
    merges_.add(l->second, r->second, static_cast<std::int32_t>(rank), m->second);
  }
  for (unsigned b = 0; b < 256; ++b) {
    const auto it = model_ids_.find(std::string(byte_level_symbol(static_cast<std::uint8_t>(b))));
    byte_ids_[b] = it == model_ids_.end() ? -1 : it->second;
  }

  // ---- added tokens ----
  std::unordered_set<std::string> contents;
  std::unordered_set<std::int32_t> added_ids;
  for (const AddedToken& t : v.added_tokens) {
    const std::string what = "added token " + quote_for_message(t.content);
    if (t.content.empty())
      fail("added tokens", "an added token (id " + std::to_string(t.id) + ") is empty");
    if (first_invalid_utf8_offset(t.content)) fail("added tokens", what + " is not valid UTF-8");
    if (!contents.insert(t.content).second) fail("added tokens", what + " appears twice");
    if (!added_ids.insert(t.id).second) {
      fail("added tokens", "id " + std::to_string(t.id) + " is given to two added tokens");
    }
    const auto in_vocab = model_ids_.find(t.content);
    if (in_vocab != model_ids_.end() && in_vocab->second != t.id) {
      fail("added tokens", what + " has id " + std::to_string(t.id) +
                               " but the vocabulary has it at " + std::to_string(in_vocab->second));
    }
    const auto index = static_cast<std::size_t>(t.id);
    if (in_vocab == model_ids_.end() && has_model_token_[index]) {
      fail("added tokens", what + " has id " + std::to_string(t.id) +
                               ", which the vocabulary gives to " +
                               quote_for_message(id_to_spelling_[index]));
    }
  }
  added_ = AddedVocabulary(std::move(v.added_tokens), v.nfc);

  // ---- options ----
  if (v.unk_token) {
    const auto it = model_ids_.find(*v.unk_token);
    if (it == model_ids_.end()) {
      fail("unk_token", quote_for_message(*v.unk_token) + " is not in the vocabulary");
    }
    unk_id_ = it->second;
  }
  fuse_unk_ = v.fuse_unk;
  add_prefix_space_ = v.add_prefix_space;
  ignore_merges_ = v.ignore_merges;
  for (const SplitPattern& s : v.splits)
    splits_.emplace_back(s.pattern, s.literal, source_ + ": " + s.origin);
  if (v.byte_level_regex) {
    byte_level_split_.emplace(kGpt2SplitPattern, false, source_ + ": ByteLevel pre-tokenizer");
  }
  const auto is_token = [&](std::int32_t id) {
    return added_.find_id(id) != nullptr || (id >= 0 && static_cast<std::size_t>(id) < size &&
                                             has_model_token_[static_cast<std::size_t>(id)]);
  };
  for (const auto* list : {&v.prefix_ids, &v.suffix_ids, &v.eos_ids}) {
    for (const std::int32_t id : *list) {
      if (!is_token(id)) fail("special tokens", "id " + std::to_string(id) + " is no token");
    }
  }
  if (v.bos_id && !is_token(*v.bos_id))
    fail("bos", "id " + std::to_string(*v.bos_id) + " is no token");
  prefix_ids_ = std::move(v.prefix_ids);
  suffix_ids_ = std::move(v.suffix_ids);
  bos_id_ = v.bos_id;
  eos_ids_ = std::move(v.eos_ids);
}

std::optional<std::int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* t = added_.find_content(token)) return t->id;
  const auto it = model_ids_.find(std::string(token));
  if (it == model_ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> BpeTokenizer::id_to_token(std::int32_t id) const {
  if (const AddedToken* t = added_.find_id(id)) return t->content;
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_spelling_.size()) return std::nullopt;
  if (!has_model_token_[static_cast<std::size_t>(id)]) return std::nullopt;
  return id_to_spelling_[static_cast<std::size_t>(id)];
}

bool BpeTokenizer::is_special(std::int32_t id) const {
  const AddedToken* t = added_.find_id(id);
  return t != nullptr && t->special;
}

std::string BpeTokenizer::description() const {
  return "byte-level BPE from " + source_ + " (" + std::to_string(vocab_size()) + " ids, " +
         std::to_string(merges_.size()) + " merges, " + std::to_string(added_.tokens().size()) +
         " added tokens)";
}

std::vector<std::int32_t> BpeTokenizer::encode_valid_utf8(std::string_view text,
                                                          EncodeOptions options) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + prefix_ids_.size() + suffix_ids_.size() + 1);
  if (options.add_special_tokens) ids = prefix_ids_;
  for (const TextSegment& segment : added_.split(text, options.parse_special)) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
    } else {
      encode_plain(segment.text, ids);
    }
  }
  if (options.add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<std::int32_t>& out) const {
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  for (const PretokenizerRegex& split : splits_) {
    next.clear();
    for (const std::string_view piece : pieces) split.split(piece, next);
    pieces.swap(next);
  }
  std::string prefixed;
  std::vector<std::string_view> words;
  for (std::string_view piece : pieces) {
    if (add_prefix_space_ && !piece.starts_with(' ')) {
      prefixed.assign(" ").append(piece);
      piece = prefixed;
    }
    words.clear();
    if (byte_level_split_) {
      byte_level_split_->split(piece, words);
    } else {
      words.push_back(piece);
    }
    for (const std::string_view word : words) encode_piece(word, out);
  }
}

void BpeTokenizer::encode_piece(std::string_view bytes, std::vector<std::int32_t>& out) const {
  if (ignore_merges_) {
    const auto it = model_ids_.find(to_byte_level(bytes));
    if (it != model_ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = bytes.size() <= kCacheMaxPieceBytes;
  std::string key;
  if (cacheable) {
    key.assign(bytes);
    const std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  // One symbol per byte (HF merge_word over the byte-level characters); a byte without a symbol
  // becomes unk (consecutive ones fused when fuse_unk) or, without unk, is dropped.
  std::vector<std::int32_t> symbols;
  symbols.reserve(bytes.size());
  bool pending_unk = false;
  for (const char c : bytes) {
    const std::int32_t id = byte_ids_[static_cast<unsigned char>(c)];
    if (id >= 0) {
      if (pending_unk) symbols.push_back(unk_id_);
      pending_unk = false;
      symbols.push_back(id);
    } else if (unk_id_ >= 0) {
      if (pending_unk && !fuse_unk_) symbols.push_back(unk_id_);
      pending_unk = true;
    }
  }
  if (pending_unk) symbols.push_back(unk_id_);
  merges_.apply(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    const std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheEntries) cache_.clear();
    cache_.emplace(std::move(key), std::move(symbols));
  }
}

std::string BpeTokenizer::decode_ids(std::span<const std::int32_t> ids,
                                     bool skip_special_tokens) const {
  std::string bytes;
  for (const std::int32_t id : ids) {
    const std::string* spelling = nullptr;
    if (const AddedToken* t = added_.find_id(id)) {
      if (skip_special_tokens && t->special) continue;
      spelling = &added_.decode_form(*t);
    } else if (id >= 0 && static_cast<std::size_t>(id) < id_to_spelling_.size() &&
               has_model_token_[static_cast<std::size_t>(id)]) {
      spelling = &id_to_spelling_[static_cast<std::size_t>(id)];
    } else {
      continue;  // no such token: HF skips it
    }
    if (!append_byte_level_bytes(*spelling, bytes)) bytes += *spelling;
  }
  return decode_utf8_lossy(bytes);
}

}  // namespace kvaudit::model
