// Unit tests of the tokenizer building blocks: UTF-8 validation and lossy decoding, the GPT-2
// byte-level alphabet, the PCRE2 pattern rewrite and Isolated splitting, added-token matching
// (leftmost-longest, lstrip / rstrip / single_word / special), and the BPE merge loop.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runners/model/model_error.h"
#include "runners/model/tokenizer/added_vocabulary.h"
#include "runners/model/tokenizer/bpe_merges.h"
#include "runners/model/tokenizer/bpe_tokenizer.h"
#include "runners/model/tokenizer/byte_level.h"
#include "runners/model/tokenizer/pretokenizer_patterns.h"
#include "runners/model/tokenizer/pretokenizer_regex.h"
#include "runners/model/tokenizer/unicode_nfc.h"
#include "runners/model/tokenizer/utf8.h"

namespace kvaudit::model {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// ---- UTF-8
// ----------------------------------------------------------------------------------------

TEST(Utf8, FindsTheFirstInvalidByte) {
  EXPECT_EQ(first_invalid_utf8_offset("plain ascii"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8_offset(std::string("nul\0inside", 10)), std::nullopt);
  EXPECT_EQ(first_invalid_utf8_offset("caf\xC3\xA9 \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8_offset("ab\xC3"), 2u);            // truncated
  EXPECT_EQ(first_invalid_utf8_offset("\xC0\x80"), 0u);          // overlong
  EXPECT_EQ(first_invalid_utf8_offset("x\xED\xA0\x80"), 1u);     // surrogate
  EXPECT_EQ(first_invalid_utf8_offset("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8_offset("ok\x80"), 2u);            // lone continuation
}

// Expected values are Python's bytes.decode("utf-8", "replace") (= Rust from_utf8_lossy).
TEST(Utf8, LossyDecodingReplacesMaximalSubparts) {
  EXPECT_EQ(decode_utf8_lossy("\xF0\x9F\x98"), kFffd);  // one cut emoji: one U+FFFD
  EXPECT_EQ(decode_utf8_lossy("a\xE2\x82"), "a" + kFffd);
  EXPECT_EQ(decode_utf8_lossy("\xC0\x80"), kFffd + kFffd);  // C0 never starts a sequence
  EXPECT_EQ(decode_utf8_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate: byte by byte
  EXPECT_EQ(decode_utf8_lossy("\xE2\x82x\xE2\x82\xAC"), kFffd + "x\xE2\x82\xAC");
  EXPECT_EQ(decode_utf8_lossy("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

// ---- byte-level alphabet
// -------------------------------------------------------------------------

TEST(ByteLevel, MapsBytesLikeGpt2) {
  EXPECT_EQ(byte_level_symbol(' '), "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(byte_level_symbol('\n'), "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(byte_level_symbol(0x00), "\xC4\x80");  // U+0100
  EXPECT_EQ(byte_level_symbol(0xAD), "\xC5\x83");  // U+0143: the last of the 68 remapped bytes
  EXPECT_EQ(byte_level_symbol('a'), "a");
  EXPECT_EQ(byte_level_symbol(0xE9), "\xC3\xA9");  // U+00E9 maps to itself
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  ASSERT_TRUE(append_byte_level_bytes(to_byte_level(all), back));
  EXPECT_EQ(back, all);
  EXPECT_TRUE(is_byte_level_spelling("\xC4\xA0the"));
  EXPECT_FALSE(is_byte_level_spelling("\xE6\x9D\xB1"));  // U+6771 is no symbol
  std::string untouched = "kept";
  EXPECT_FALSE(append_byte_level_bytes("a\xE6\x9D\xB1", untouched));
  EXPECT_EQ(untouched, "kept");
}

TEST(UnicodeNfc, ComposesCombiningMarks) {
  EXPECT_EQ(to_nfc("cafe\xCC\x81"), "caf\xC3\xA9");  // e + U+0301 -> U+00E9
  EXPECT_EQ(to_nfc("\xE2\x84\xAB"), "\xC3\x85");     // U+212B ANGSTROM SIGN -> U+00C5
  EXPECT_EQ(to_nfc("plain"), "plain");
}

// ---- PCRE2 pattern rewrite and splitting
// ------------------------------------------------------------

const std::string kSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

TEST(PretokenizerRegex, SpellsWhiteSpaceClassesAsUnicodeWhiteSpace) {
  EXPECT_EQ(with_unicode_white_space_classes(R"(\s+(?!\S))"),
            "[" + kSpace + "]+(?![^" + kSpace + "])");
  EXPECT_EQ(with_unicode_white_space_classes(R"([^\s\p{L}])"), "[^" + kSpace + R"(\p{L}])");
  EXPECT_EQ(with_unicode_white_space_classes(R"(\\s)"), R"(\\s)");        // escaped backslash
  EXPECT_EQ(with_unicode_white_space_classes(R"(\Q\s\E)"), R"(\Q\s\E)");  // quoted
  EXPECT_EQ(with_unicode_white_space_classes(R"([\]\s]x)"), R"([\])" + kSpace + "]x");
  EXPECT_EQ(with_unicode_white_space_classes(R"([]\s])"), "[]" + kSpace + "]");  // leading ']'
}

std::vector<std::string> split(const PretokenizerRegex& regex, std::string_view text) {
  std::vector<std::string_view> pieces;
  regex.split(text, pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(PretokenizerRegex, SplitsIsolatedWithTheGpt2Pattern) {
  const PretokenizerRegex gpt2(kGpt2SplitPattern, false, "test");
  EXPECT_EQ(split(gpt2, "Hello world's  test\n"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " test", "\n"}));
  EXPECT_EQ(split(gpt2, "x\xE1\xA0\x8E't"),  // U+180E is no white space (as in Oniguruma)
            (std::vector<std::string>{"x", "\xE1\xA0\x8E'", "t"}));
  EXPECT_EQ(split(gpt2, ""), std::vector<std::string>{});
}

TEST(PretokenizerRegex, SplitsDigitsLikeLlama3AndQwen2) {
  EXPECT_EQ(split(PretokenizerRegex(kLlama3SplitPattern, false, "llama3"), "a 1234567"),
            (std::vector<std::string>{"a", " ", "123", "456", "7"}));
  EXPECT_EQ(split(PretokenizerRegex(kQwen2SplitPattern, false, "qwen2"), "12"),
            (std::vector<std::string>{"1", "2"}));
}

// HF (Oniguruma find_iter + Isolated) on "aébb" with b*: [('a'), ('é'), ('bb')] -- each empty
// match closes the stretch before it.
TEST(PretokenizerRegex, EmptyMatchesMoveOnOneCodePoint) {
  const PretokenizerRegex stars("b*", false, "test");
  EXPECT_EQ(split(stars,
                  "a\xC3\xA9"
                  "bb"),
            (std::vector<std::string>{"a", "\xC3\xA9", "bb"}));
  const PretokenizerRegex literal("a.b", true, "test");
  EXPECT_EQ(split(literal, "xa.bya+b"), (std::vector<std::string>{"x", "a.b", "ya+b"}));
}

TEST(PretokenizerRegex, RejectsPatternsThatDoNotCompile) {
  try {
    PretokenizerRegex("(unclosed", false, "file.json: pre_tokenizer.pattern.Regex");
    FAIL() << "expected ModelInputError";
  } catch (const ModelInputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("file.json: pre_tokenizer.pattern.Regex"), std::string::npos) << message;
    EXPECT_NE(message.find("does not compile"), std::string::npos) << message;
  }
}

TEST(PretokenizerPatterns, EveryGgufPatternCompiles) {
  for (const GgufPreTokenizer& p : gguf_pre_tokenizers()) {
    if (p.split_pattern.empty()) continue;
    EXPECT_NO_THROW(PretokenizerRegex(p.split_pattern, false, std::string(p.name))) << p.name;
  }
}

// ---- added tokens
// ---------------------------------------------------------------------------------

struct Piece {
  std::int32_t id;
  std::string text;
  bool operator==(const Piece&) const = default;
};

std::vector<Piece> pieces_of(const AddedVocabulary& vocabulary, std::string_view text,
                             bool parse_special = true) {
  std::vector<Piece> out;
  for (const TextSegment& s : vocabulary.split(text, parse_special))
    out.push_back({s.token_id, s.text});
  return out;
}

AddedToken token(std::string content, std::int32_t id, bool special) {
  AddedToken t;
  t.content = std::move(content);
  t.id = id;
  t.special = special;
  return t;
}

TEST(AddedVocabulary, TakesTheLeftmostThenLongestMatch) {
  const AddedVocabulary v({token("<a>", 1, true), token("<a>b", 2, true), token("b<a>", 3, true)},
                          false);
  EXPECT_EQ(pieces_of(v, "x<a>b<a>y"),
            (std::vector<Piece>{{-1, "x"}, {2, ""}, {1, ""}, {-1, "y"}}));
}

TEST(AddedVocabulary, SkipsSpecialTokensWhenNotParsingThem) {
  const AddedVocabulary v({token("<s>", 1, true), token("<think>", 2, false)}, false);
  EXPECT_EQ(pieces_of(v, "<s>a<think>", false), (std::vector<Piece>{{-1, "<s>a"}, {2, ""}}));
}

TEST(AddedVocabulary, HonoursStripAndSingleWordFlags) {
  AddedToken left = token("<m>", 1, true);
  left.lstrip = true;
  AddedToken right = token("[S]", 2, true);
  right.rstrip = true;
  AddedToken word = token("w", 3, false);
  word.single_word = true;
  const AddedVocabulary v({left, right, word}, false);
  EXPECT_EQ(pieces_of(v, "a  <m> b"), (std::vector<Piece>{{-1, "a"}, {1, ""}, {-1, " b"}}));
  EXPECT_EQ(pieces_of(v, "a [S]  b"), (std::vector<Piece>{{-1, "a "}, {2, ""}, {-1, "b"}}));
  EXPECT_EQ(pieces_of(v, "w aw w."),
            (std::vector<Piece>{{3, ""}, {-1, " aw "}, {3, ""}, {-1, "."}}));
}

TEST(AddedVocabulary, MatchesNormalizedTokensInNfcText) {
  AddedToken cafe = token("cafe\xCC\x81", 7, false);  // decomposed; matched by its NFC form
  cafe.normalized = true;
  const AddedVocabulary v({cafe}, true);
  EXPECT_EQ(pieces_of(v, "a cafe\xCC\x81 caf\xC3\xA9"),
            (std::vector<Piece>{{-1, "a "}, {7, ""}, {-1, " "}, {7, ""}}));
  EXPECT_EQ(v.decode_form(v.tokens()[0]), "caf\xC3\xA9");
}

// ---- BPE merges
// -----------------------------------------------------------------------------------

TEST(BpeMergeTable, MergesLowestRankFirstAndLeftmostAmongEqualRanks) {
  BpeMergeTable table;
  table.add(1, 2, /*rank=*/1, /*merged=*/10);  // a b -> ab
  table.add(2, 3, /*rank=*/0, /*merged=*/11);  // b c -> bc
  std::vector<std::int32_t> abc{1, 2, 3};
  table.apply(abc);
  EXPECT_EQ(abc, (std::vector<std::int32_t>{1, 11}));

  BpeMergeTable repeat;
  repeat.add(5, 5, 0, 6);  // a a -> aa
  repeat.add(6, 6, 1, 7);  // aa aa -> aaaa
  std::vector<std::int32_t> five{5, 5, 5, 5, 5};
  repeat.apply(five);
  EXPECT_EQ(five, (std::vector<std::int32_t>{7, 5}));
}

}  // namespace
}  // namespace kvaudit::model
