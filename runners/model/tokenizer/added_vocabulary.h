// Added tokens (special tokens such as "<|im_start|>" and user tokens such as "<think>") and the
// first step of encoding: cutting them out of the text before normalization and pre-tokenization.
//
// Semantics of HF tokenizers' AddedVocabulary (tokenizer/added_vocabulary.rs,
// extract_and_normalize / find_matches):
//   1. tokens with normalized=false are found in the raw text;
//   2. each remaining stretch is normalized (NFC when the tokenizer has it), and tokens with
//      normalized=true are found in it by their normalized form.
// Each search scans left to right and takes the leftmost, then longest, match (Aho-Corasick
// LeftmostLongest); the scan continues after a match even when the match is then discarded:
//   * special tokens are discarded when parse_special is false (split_special_tokens);
//   * single_word tokens are discarded when a word character (Rust regex \w) touches either end;
//   * lstrip / rstrip tokens also take the white space (Unicode White_Space) before / after them.
// One deviation: a match that lies wholly inside white space an rstrip token already took is
// dropped (HF would emit overlapping pieces; no real vocabulary can produce this).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvaudit::model {

struct AddedToken {
  std::string content;
  std::int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// A piece of the input after added tokens are cut out: either an added token or plain text
// (already normalized) that still has to be pre-tokenized.
struct TextSegment {
  std::int32_t token_id = -1;   // >= 0 for an added token
  std::string text;             // plain text; empty for a token
  bool at_input_start = false;  // begins at byte 0 of the input (Metaspace prepend_scheme "first")
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `tokens` have distinct non-empty contents and distinct ids (callers check, naming their file).
  // `nfc`: the tokenizer normalizes with NFC, so normalized tokens are matched by their NFC form.
  AddedVocabulary(std::vector<AddedToken> tokens, bool nfc);

  // Segments of valid UTF-8 `text` in order; plain segments are never empty.
  std::vector<TextSegment> split(std::string_view text, bool parse_special) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find_id(std::int32_t id) const;
  const AddedToken* find_content(std::string_view content) const;
  // The string HF's decoder receives for `token`: its NFC form when it is normalized and the
  // tokenizer normalizes (HF's normalized_cache), else its content.
  const std::string& decode_form(const AddedToken& token) const;
  bool nfc() const { return nfc_; }

 private:
  // Byte trie over token contents for leftmost-longest search.
  class Trie {
   public:
    void insert(std::string_view key, std::size_t value);
    bool empty() const { return nodes_.size() <= 1; }
    // Leftmost-longest match in text[from..]: {start, end, value}.
    struct Match {
      std::size_t start = 0;
      std::size_t end = 0;
      std::size_t value = 0;
    };
    std::optional<Match> find(std::string_view text, std::size_t from) const;

   private:
    struct Node {
      std::vector<std::pair<unsigned char, std::int32_t>> children;  // sorted by byte
      std::int64_t value = -1;
    };
    std::int32_t child(std::int32_t node, unsigned char byte) const;
    std::vector<Node> nodes_{Node{}};
    std::array<bool, 256> first_byte_{};
  };

  void match_stage(std::string_view sentence, const Trie& trie, bool parse_special,
                   std::vector<std::pair<std::size_t, std::size_t>>& ranges,
                   std::vector<std::int64_t>& token_indices) const;

  std::vector<AddedToken> tokens_;
  std::vector<std::string> decode_forms_;
  bool nfc_ = false;
  Trie raw_trie_;         // normalized == false, by content
  Trie normalized_trie_;  // normalized == true, by decode form
  std::unordered_map<std::int32_t, std::size_t> by_id_;
  std::unordered_map<std::string, std::size_t> by_content_;
};

}  // namespace kvaudit::model
