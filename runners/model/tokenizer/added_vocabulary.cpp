// Leftmost-longest added-token search with HF's single_word / lstrip / rstrip / special rules.
#include "runners/model/tokenizer/added_vocabulary.h"

#include <utf8proc.h>

#include <algorithm>

#include "runners/model/tokenizer/unicode_nfc.h"
#include "runners/model/tokenizer/utf8.h"

namespace kvaudit::model {
namespace {

// Unicode White_Space (PropList.txt), which Rust regex's \s matches.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Rust regex's Unicode \w: Alphabetic | Mark | Decimal_Number | Connector_Punctuation |
// Join_Control. Alphabetic is taken as the letter categories plus Nl plus the non-letter
// Other_Alphabetic symbols (circled and squared Latin letters); the remaining Other_Alphabetic
// code points are combining marks, which Mark already covers.
bool is_word_character(char32_t c) {
  if (c == 0x200C || c == 0x200D) return true;
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
      (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189)) {
    return true;
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool ends_with_word(std::string_view text) {
  if (text.empty()) return false;
  char32_t c = 0;
  decode_code_point_before(text, text.size(), c);
  return is_word_character(c);
}

bool starts_with_word(std::string_view text) {
  if (text.empty()) return false;
  char32_t c = 0;
  decode_code_point(text, 0, c);
  return is_word_character(c);
}

// Start of the white space that ends `text` (text.size() when there is none).
std::size_t trailing_space_start(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0) {
    char32_t c = 0;
    const std::size_t length = decode_code_point_before(text, end, c);
    if (!is_white_space(c)) break;
    end -= length;
  }
  return end;
}

// Length of the white space that starts `text`.
std::size_t leading_space_length(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    char32_t c = 0;
    const std::size_t length = decode_code_point(text, i, c);
    if (!is_white_space(c)) break;
    i += length;
  }
  return i;
}

}  // namespace

// ---- Trie
// -----------------------------------------------------------------------------------------

std::int32_t AddedVocabulary::Trie::child(std::int32_t node, unsigned char byte) const {
  const auto& children = nodes_[static_cast<std::size_t>(node)].children;
  const auto it =
      std::lower_bound(children.begin(), children.end(), byte,
                       [](const auto& entry, unsigned char b) { return entry.first < b; });
  if (it == children.end() || it->first != byte) return -1;
  return it->second;
}

void AddedVocabulary::Trie::insert(std::string_view key, std::size_t value) {
  std::int32_t node = 0;
  for (const char c : key) {
    const auto byte = static_cast<unsigned char>(c);
    std::int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<std::int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& children = nodes_[static_cast<std::size_t>(node)].children;
      const auto it =
          std::lower_bound(children.begin(), children.end(), byte,
                           [](const auto& entry, unsigned char b) { return entry.first < b; });
      children.insert(it, {byte, next});
    }
    node = next;
  }
  nodes_[static_cast<std::size_t>(node)].value = static_cast<std::int64_t>(value);
  if (!key.empty()) first_byte_[static_cast<unsigned char>(key.front())] = true;
}

std::optional<AddedVocabulary::Trie::Match> AddedVocabulary::Trie::find(std::string_view text,
                                                                        std::size_t from) const {
  for (std::size_t start = from; start < text.size(); ++start) {
    if (!first_byte_[static_cast<unsigned char>(text[start])]) continue;
    std::int32_t node = 0;
    std::optional<Match> best;
    for (std::size_t i = start; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      const std::int64_t value = nodes_[static_cast<std::size_t>(node)].value;
      if (value >= 0) best = Match{start, i + 1, static_cast<std::size_t>(value)};
    }
    if (best) return best;
  }
  return std::nullopt;
}

// ---- AddedVocabulary
// -------------------------------------------------------------------------------

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, bool nfc)
    : tokens_(std::move(tokens)), nfc_(nfc) {
  decode_forms_.reserve(tokens_.size());
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& token = tokens_[i];
    decode_forms_.push_back(token.normalized && nfc_ ? to_nfc(token.content) : token.content);
    if (token.normalized) {
      normalized_trie_.insert(decode_forms_.back(), i);
    } else {
      raw_trie_.insert(token.content, i);
    }
    by_id_.emplace(token.id, i);
    by_content_.emplace(token.content, i);
  }
}

const AddedToken* AddedVocabulary::find_id(std::int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::find_content(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

const std::string& AddedVocabulary::decode_form(const AddedToken& token) const {
  return decode_forms_[static_cast<std::size_t>(&token - tokens_.data())];
}

void AddedVocabulary::match_stage(std::string_view sentence, const Trie& trie, bool parse_special,
                                  std::vector<std::pair<std::size_t, std::size_t>>& ranges,
                                  std::vector<std::int64_t>& token_indices) const {
  ranges.clear();
  token_indices.clear();
  std::size_t taken = 0;  // end of the last emitted piece
  std::size_t from = 0;   // where the search resumes (end of the last match)
  while (!trie.empty()) {
    const auto match = trie.find(sentence, from);
    if (!match) break;
    from = match->end;
    const AddedToken& token = tokens_[match->value];
    if (token.special && !parse_special) continue;
    if (token.single_word) {
      const bool space_before =
          match->start == 0 || !ends_with_word(sentence.substr(0, match->start));
      const bool space_after =
          match->end == sentence.size() || !starts_with_word(sentence.substr(match->end));
      if (!space_before || !space_after) continue;
    }
    if (match->end <= taken) continue;  // inside white space an rstrip token already took
    std::size_t start = std::max(match->start, taken);
    std::size_t stop = match->end;
    if (token.lstrip) start = std::max(trailing_space_start(sentence.substr(0, start)), taken);
    if (token.rstrip) stop += leading_space_length(sentence.substr(stop));
    if (taken < start) {
      ranges.emplace_back(taken, start);
      token_indices.push_back(-1);
    }
    ranges.emplace_back(start, stop);
    token_indices.push_back(static_cast<std::int64_t>(match->value));
    taken = stop;
  }
  if (taken < sentence.size()) {
    ranges.emplace_back(taken, sentence.size());
    token_indices.push_back(-1);
  }
}

std::vector<TextSegment> AddedVocabulary::split(std::string_view text, bool parse_special) const {
  std::vector<TextSegment> segments;
  std::vector<std::pair<std::size_t, std::size_t>> outer_ranges;
  std::vector<std::int64_t> outer_tokens;
  std::vector<std::pair<std::size_t, std::size_t>> inner_ranges;
  std::vector<std::int64_t> inner_tokens;
  match_stage(text, raw_trie_, parse_special, outer_ranges, outer_tokens);
  for (std::size_t i = 0; i < outer_ranges.size(); ++i) {
    const auto [begin, end] = outer_ranges[i];
    if (outer_tokens[i] >= 0) {
      segments.push_back({tokens_[static_cast<std::size_t>(outer_tokens[i])].id, {}, begin == 0});
      continue;
    }
    const std::string_view raw = text.substr(begin, end - begin);
    const std::string normalized = nfc_ ? to_nfc(raw) : std::string(raw);
    match_stage(normalized, normalized_trie_, parse_special, inner_ranges, inner_tokens);
    for (std::size_t k = 0; k < inner_ranges.size(); ++k) {
      const auto [b, e] = inner_ranges[k];
      const bool at_start = begin == 0 && b == 0;
      if (inner_tokens[k] >= 0) {
        segments.push_back({tokens_[static_cast<std::size_t>(inner_tokens[k])].id, {}, at_start});
      } else if (e > b) {
        segments.push_back({-1, normalized.substr(b, e - b), at_start});
      }
    }
  }
  return segments;
}

}  // namespace kvaudit::model
