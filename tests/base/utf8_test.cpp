// Tests of base/utf8: every ill-formed class of Unicode 15 §3.9 table 3-7, the maximal-subpart
// lengths (the expected values are what CPython's bytes.decode("utf-8", "replace") and Rust's
// String::from_utf8_lossy return), NUL, encode/decode round trips over every scalar value, the
// backwards decoder, and exhaustive checks against an oracle built from the encoder.
#include "base/utf8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace kvaudit {
namespace {

const std::string kFffd(kReplacementCharacter);

bool is_scalar_value(char32_t c) { return c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF); }

std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out.push_back(static_cast<char>(v));
  return out;
}

// The maximal-subpart lengths of `bytes`, sequence by sequence (0 marks a well-formed sequence).
std::vector<std::size_t> ill_formed_lengths(std::string_view bytes) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < bytes.size();) {
    const Utf8Sequence s = decode_utf8_at(bytes, i);
    out.push_back(s.well_formed ? 0 : s.length);
    i += s.length;
  }
  return out;
}

TEST(Utf8Decode, WellFormedSequencesOfEachLength) {
  const struct {
    std::string bytes;
    char32_t code_point;
  } cases[] = {{"A", U'A'},
               {bytes_of({0x7F}), 0x7F},
               {"\xC2\x80", 0x80},
               {"\xDF\xBF", 0x7FF},
               {"\xE0\xA0\x80", 0x800},
               {"\xED\x9F\xBF", 0xD7FF},
               {"\xEE\x80\x80", 0xE000},
               {"\xEF\xBF\xBD", 0xFFFD},
               {"\xEF\xBF\xBF", 0xFFFF},
               {"\xF0\x90\x80\x80", 0x10000},
               {"\xF0\x9F\x98\x80", 0x1F600},
               {"\xF4\x8F\xBF\xBF", 0x10FFFF}};
  for (const auto& c : cases) {
    const Utf8Sequence s = decode_utf8_at(c.bytes, 0);
    EXPECT_TRUE(s.well_formed) << static_cast<unsigned>(c.code_point);
    EXPECT_EQ(s.code_point, c.code_point);
    EXPECT_EQ(s.length, c.bytes.size());
  }
}

TEST(Utf8Decode, EveryIllFormedClassIsReportedWithItsMaximalSubpart) {
  const struct {
    const char* what;
    std::string bytes;
    std::vector<std::size_t> lengths;  // per sequence; 0 = well-formed
  } cases[] = {
      {"lone continuation 80", "\x80", {1}},
      {"lone continuation BF", "\xBF", {1}},
      {"continuations after ASCII", "a\x80\xBF", {0, 1, 1}},
      {"truncated 2-byte", "\xC3", {1}},
      {"truncated 3-byte after 1", "\xE2", {1}},
      {"truncated 3-byte after 2", "\xE2\x82", {2}},
      {"truncated 4-byte after 1", "\xF0", {1}},
      {"truncated 4-byte after 2", "\xF0\x9F", {2}},
      {"truncated 4-byte after 3", "\xF0\x9F\x98", {3}},
      {"2-byte lead then ASCII", "\xC3(", {1, 0}},
      {"3-byte broken at byte 2", "\xE2\x28\xA1", {1, 0, 1}},
      {"3-byte broken at byte 3", "\xE2\x82(", {2, 0}},
      {"4-byte broken at byte 4", "\xF0\x9F\x98(", {3, 0}},
      {"overlong C0", "\xC0\xAF", {1, 1}},
      {"overlong C1", "\xC1\xBF", {1, 1}},
      {"overlong E0 80", "\xE0\x80\xAF", {1, 1, 1}},
      {"overlong E0 9F", "\xE0\x9F\xBF", {1, 1, 1}},
      {"overlong F0 80", "\xF0\x80\x80\xAF", {1, 1, 1, 1}},
      {"overlong F0 8F", "\xF0\x8F\xBF\xBF", {1, 1, 1, 1}},
      {"surrogate D800", "\xED\xA0\x80", {1, 1, 1}},
      {"surrogate DFFF", "\xED\xBF\xBF", {1, 1, 1}},
      {"above U+10FFFF: F4 90", "\xF4\x90\x80\x80", {1, 1, 1, 1}},
      {"above U+10FFFF: F4 BF", "\xF4\xBF\xBF\xBF", {1, 1, 1, 1}},
      {"F5", "\xF5\x80\x80\x80", {1, 1, 1, 1}},
      {"F7", "\xF7\xBF\xBF\xBF", {1, 1, 1, 1}},
      {"F8 (old 5-byte)", "\xF8\x88\x80\x80\x80", {1, 1, 1, 1, 1}},
      {"FC (old 6-byte)", "\xFC\x84\x80\x80\x80\x80", {1, 1, 1, 1, 1, 1}},
      {"FE", "\xFE", {1}},
      {"FF", "\xFF", {1}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ill_formed_lengths(c.bytes), c.lengths) << c.what;
    const Utf8Sequence first = decode_utf8_at(c.bytes, 0);
    if (!first.well_formed) {
      EXPECT_EQ(first.code_point, kReplacementCodePoint) << c.what;
    }
  }
}

TEST(Utf8Decode, TheBytesAfterAnIllFormedSubpartStartAfresh) {
  // "\xE2\x82" is one subpart; "\xE2\x82\xAC" after it is the euro sign.
  EXPECT_EQ(decode_utf8_replace("\xE2\x82\xE2\x82\xAC"), U"\uFFFD\u20AC");
  // A lead inside a truncated sequence starts the next one.
  EXPECT_EQ(decode_utf8_replace("\xF0\x9F\xC3\xA9"), U"\uFFFD\u00E9");
}

TEST(Utf8Decode, LossyAndReplaceSubstituteOneFffdPerMaximalSubpart) {
  EXPECT_EQ(decode_utf8_lossy("\xF0\x9F\x98"), kFffd);
  EXPECT_EQ(decode_utf8_replace("\xF0\x9F\x98"), U"\uFFFD");
  EXPECT_EQ(decode_utf8_lossy("\xE2\x28\xA1"), kFffd + "(" + kFffd);
  EXPECT_EQ(decode_utf8_replace("\xE2\x28\xA1"), U"\uFFFD(\uFFFD");
  EXPECT_EQ(decode_utf8_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);
  EXPECT_EQ(decode_utf8_replace("\xF4\x90\x80\x80"), U"\uFFFD\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(decode_utf8_lossy("a\xE2\x82"), "a" + kFffd);
  EXPECT_EQ(decode_utf8_lossy("\xC0\x80"), kFffd + kFffd);
  // The Unicode §3.9 example: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  EXPECT_EQ(decode_utf8_replace("a\xF1\x80\x80\xE1\x80\xC2"
                                "b\x80"
                                "c\x80\xBF"
                                "d"),
            U"a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd");
  EXPECT_EQ(decode_utf8_lossy(""), "");
  EXPECT_EQ(decode_utf8_replace(""), U"");
  const std::string valid = "caf\xC3\xA9 \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x98\x80";
  EXPECT_EQ(decode_utf8_lossy(valid), valid);
}

TEST(Utf8Decode, NulIsAnOrdinaryCodePoint) {
  const std::string with_nul("a\0b", 3);
  const Utf8Sequence nul = decode_utf8_at(with_nul, 1);
  EXPECT_TRUE(nul.well_formed);
  EXPECT_EQ(nul.code_point, U'\0');
  EXPECT_EQ(nul.length, 1u);
  EXPECT_EQ(first_invalid_utf8_offset(with_nul), std::nullopt);
  EXPECT_EQ(decode_utf8_lossy(with_nul), with_nul);
  EXPECT_EQ(decode_utf8_replace(with_nul), std::u32string(U"a\0b", 3));
  EXPECT_EQ(count_utf8_code_points(with_nul), 3u);
  EXPECT_EQ(encode_utf8(std::u32string(U"\0", 1)), std::string(1, '\0'));
  // An overlong NUL (C0 80) is not NUL: two ill-formed bytes.
  EXPECT_EQ(decode_utf8_replace("\xC0\x80"), U"\uFFFD\uFFFD");
}

TEST(Utf8Decode, FirstInvalidOffsetIsTheStartOfTheFirstIllFormedSequence) {
  EXPECT_EQ(first_invalid_utf8_offset(""), std::nullopt);
  EXPECT_EQ(first_invalid_utf8_offset("plain ascii"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8_offset("\xF4\x8F\xBF\xBF"), std::nullopt);  // U+10FFFF
  EXPECT_EQ(first_invalid_utf8_offset("ab\xC3"), 2u);
  EXPECT_EQ(first_invalid_utf8_offset("a\xE0\x80\xAF"), 1u);
  EXPECT_EQ(first_invalid_utf8_offset("ok\xED\xA0\x80"), 2u);
  EXPECT_EQ(first_invalid_utf8_offset("\xC3\xA9\xF0\x9F\x98"), 2u);
  EXPECT_EQ(first_invalid_utf8_offset("x\x80"), 1u);
  EXPECT_EQ(first_invalid_utf8_offset("xy\xFF"), 2u);
}

TEST(Utf8Decode, CountsCodePointsOfValidText) {
  EXPECT_EQ(count_utf8_code_points(""), 0u);
  EXPECT_EQ(count_utf8_code_points("abc"), 3u);
  // len("Größe 東京 😀") == 10 in Python.
  EXPECT_EQ(count_utf8_code_points("Gr\xC3\xB6\xC3\x9F"
                                   "e \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x98\x80"),
            10u);
}

TEST(Utf8Encode, EveryScalarValueRoundTrips) {
  std::u32string all;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (!is_scalar_value(c)) continue;
    std::string bytes;
    append_utf8(bytes, c);
    const std::size_t want_length = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    ASSERT_EQ(bytes.size(), want_length) << static_cast<unsigned>(c);
    const Utf8Sequence s = decode_utf8_at(bytes, 0);
    ASSERT_TRUE(s.well_formed) << static_cast<unsigned>(c);
    ASSERT_EQ(s.code_point, c);
    ASSERT_EQ(s.length, bytes.size());
    const Utf8Sequence back = decode_utf8_before(bytes, bytes.size());
    ASSERT_TRUE(back.well_formed) << static_cast<unsigned>(c);
    ASSERT_EQ(back.code_point, c);
    ASSERT_EQ(back.length, bytes.size());
    all.push_back(c);
  }
  const std::string encoded = encode_utf8(all);
  EXPECT_EQ(first_invalid_utf8_offset(encoded), std::nullopt);
  EXPECT_EQ(count_utf8_code_points(encoded), all.size());
  EXPECT_EQ(decode_utf8_replace(encoded), all);
  EXPECT_EQ(decode_utf8_lossy(encoded), encoded);
}

TEST(Utf8DecodeBefore, WalksValidTextBackwards) {
  const std::u32string text(U"a\u00E9\u6771\U0001F600\0z", 6);
  const std::string bytes = encode_utf8(text);
  std::u32string backwards;
  for (std::size_t end = bytes.size(); end > 0;) {
    const Utf8Sequence s = decode_utf8_before(bytes, end);
    ASSERT_TRUE(s.well_formed);
    backwards.insert(backwards.begin(), s.code_point);
    end -= s.length;
  }
  EXPECT_EQ(backwards, text);
}

TEST(Utf8DecodeBefore, IllFormedEndsStepBackOneByte) {
  const struct {
    std::string bytes;
    std::size_t end;
  } cases[] = {
      {"\x80", 1},                  // lone continuation
      {"a\x80\x80", 3},             // continuations after ASCII
      {"a\xE2\x82", 3},             // truncated 3-byte sequence
      {"\xF0\x9F\x98", 3},          // truncated 4-byte sequence
      {"\xE2\x82\xAC\x80", 4},      // a continuation after a complete sequence
      {"\x80\x80\x80\x80\x80", 5},  // more continuations than any sequence holds
      {"\xED\xA0\x80", 3},          // surrogate
      {"\xC0\xAF", 2},              // overlong
      {"\xE2", 1},                  // lead at the end
      {"\xFF", 1},
  };
  for (const auto& c : cases) {
    const Utf8Sequence s = decode_utf8_before(c.bytes, c.end);
    EXPECT_FALSE(s.well_formed) << c.end;
    EXPECT_EQ(s.length, 1u);
    EXPECT_EQ(s.code_point, kReplacementCodePoint);
  }
  // A well-formed sequence before `end` is found even when the text is ill-formed further back.
  const Utf8Sequence euro = decode_utf8_before("\x80\xE2\x82\xAC", 4);
  EXPECT_TRUE(euro.well_formed);
  EXPECT_EQ(euro.code_point, U'\u20AC');
  EXPECT_EQ(euro.length, 3u);
}

// Oracle, from the definitions rather than from table 3-7: a well-formed sequence is the
// encoding of a scalar value (bit layout 0xxxxxxx | 110xxxxx 10xxxxxx | ..., and the shortest one:
// encoding the value again gives the same bytes), and the maximal subpart at an ill-formed position
// is its longest prefix that begins the encoding of some scalar value.
class Utf8Oracle : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    prefixes_ = new std::unordered_set<std::string>();
    for (char32_t c = 0; c <= 0x10FFFF; ++c) {
      if (!is_scalar_value(c)) continue;
      std::string bytes;
      append_utf8(bytes, c);
      for (std::size_t k = 1; k < bytes.size(); ++k) prefixes_->insert(bytes.substr(0, k));
    }
  }
  static void TearDownTestSuite() { delete prefixes_; }

  // The scalar value whose encoding `bytes` is, if any.
  static std::optional<char32_t> encoded_scalar(std::string_view bytes) {
    const auto b0 = static_cast<std::uint8_t>(bytes[0]);
    const std::size_t n = b0 < 0x80               ? 1
                          : (b0 & 0xE0u) == 0xC0u ? 2
                          : (b0 & 0xF0u) == 0xE0u ? 3
                          : (b0 & 0xF8u) == 0xF0u ? 4
                                                  : 0;
    if (n == 0 || n != bytes.size()) return std::nullopt;
    char32_t value = n == 1 ? b0 : b0 & (0x7Fu >> n);
    for (std::size_t k = 1; k < n; ++k) {
      const auto b = static_cast<std::uint8_t>(bytes[k]);
      if ((b & 0xC0u) != 0x80u) return std::nullopt;
      value = (value << 6) | (b & 0x3Fu);
    }
    if (!is_scalar_value(value)) return std::nullopt;
    std::string again;
    append_utf8(again, value);
    if (again != bytes) return std::nullopt;  // an overlong form
    return value;
  }

  // What decode_utf8_at(bytes, 0) must return.
  static Utf8Sequence expected(std::string_view bytes) {
    for (std::size_t k = std::min<std::size_t>(4, bytes.size()); k > 0; --k) {
      if (const auto value = encoded_scalar(bytes.substr(0, k))) return {*value, k, true};
    }
    std::size_t subpart = 1;
    for (std::size_t k = std::min<std::size_t>(3, bytes.size()); k > 1; --k) {
      if (prefixes_->count(std::string(bytes.substr(0, k))) != 0) {
        subpart = k;
        break;
      }
    }
    return {kReplacementCodePoint, subpart, false};
  }

  static void check(const std::string& bytes) {
    const Utf8Sequence got = decode_utf8_at(bytes, 0);
    const Utf8Sequence want = expected(bytes);
    ASSERT_EQ(got.well_formed, want.well_formed) << testing::PrintToString(bytes);
    ASSERT_EQ(got.code_point, want.code_point) << testing::PrintToString(bytes);
    ASSERT_EQ(got.length, want.length) << testing::PrintToString(bytes);
  }

  static std::unordered_set<std::string>* prefixes_;
};

std::unordered_set<std::string>* Utf8Oracle::prefixes_ = nullptr;

TEST_F(Utf8Oracle, EveryOneAndTwoByteInput) {
  for (int b0 = 0; b0 < 256; ++b0) {
    check(bytes_of({b0}));
    for (int b1 = 0; b1 < 256; ++b1) check(bytes_of({b0, b1}));
  }
}

TEST_F(Utf8Oracle, EveryMultiByteLeadWithBoundaryContinuations) {
  // Every value at which table 3-7 changes its answer, and one ordinary value in between.
  const int boundaries[] = {0x00, 0x41, 0x7F, 0x80, 0x81, 0x8F, 0x90, 0x9F,
                            0xA0, 0xAF, 0xBF, 0xC0, 0xC2, 0xE0, 0xF0, 0xFF};
  for (int b0 = 0xC0; b0 < 256; ++b0) {
    for (const int b1 : boundaries) {
      for (const int b2 : boundaries) {
        check(bytes_of({b0, b1, b2}));
        for (const int b3 : boundaries) check(bytes_of({b0, b1, b2, b3}));
      }
    }
  }
}

TEST(Utf8Decode, LossyEqualsReplaceThenEncodeOnRandomBytes) {
  // Bytes drawn mostly from leads and continuations, so that every ill-formed class shows up.
  const std::uint8_t alphabet[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0,
                                   0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<std::size_t> pick(0, std::size(alphabet) - 1);
  std::uniform_int_distribution<std::size_t> size(0, 24);
  for (int trial = 0; trial < 20000; ++trial) {
    std::string bytes;
    for (std::size_t n = size(rng); n > 0; --n)
      bytes.push_back(static_cast<char>(alphabet[pick(rng)]));
    const std::string lossy = decode_utf8_lossy(bytes);
    ASSERT_EQ(lossy, encode_utf8(decode_utf8_replace(bytes))) << testing::PrintToString(bytes);
    ASSERT_EQ(first_invalid_utf8_offset(lossy), std::nullopt);
    ASSERT_EQ(first_invalid_utf8_offset(bytes) == std::nullopt, lossy == bytes);
  }
}

}  // namespace
}  // namespace kvaudit
