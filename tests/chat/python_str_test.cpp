// Tests of runners/model/chat/python_str: UTF-8 validation, len() in code points and Python's
// str.strip() whitespace set (the expected values are what CPython 3.11 returns).
#include "runners/model/chat/python_str.h"

#include <gtest/gtest.h>

#include <string>

namespace kvaudit::model {
namespace {

TEST(PythonStr, ValidUtf8IsAccepted) {
  EXPECT_EQ(first_invalid_utf8_byte(""), std::nullopt);
  EXPECT_EQ(first_invalid_utf8_byte("plain ascii"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8_byte("Gr\xC3\xB6\xC3\x9F"
                                    "e \xE6\x9D\xB1 \xF0\x9F\x98\x80"),
            std::nullopt);
  EXPECT_EQ(first_invalid_utf8_byte("\xF4\x8F\xBF\xBF"), std::nullopt);  // U+10FFFF
}

TEST(PythonStr, IllFormedUtf8IsReportedAtItsFirstByte) {
  EXPECT_EQ(first_invalid_utf8_byte("ab\xC3"), 2u);            // truncated
  EXPECT_EQ(first_invalid_utf8_byte("a\xC0\xAF"), 1u);         // overlong '/'
  EXPECT_EQ(first_invalid_utf8_byte("a\xE0\x80\xAF"), 1u);     // overlong
  EXPECT_EQ(first_invalid_utf8_byte("ok\xED\xA0\x80"), 2u);    // surrogate U+D800
  EXPECT_EQ(first_invalid_utf8_byte("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8_byte("x\x80"), 1u);             // stray continuation
  EXPECT_EQ(first_invalid_utf8_byte("xy\xFF"), 2u);
}

TEST(PythonStr, LengthCountsCodePoints) {
  EXPECT_EQ(python_code_point_count(""), 0u);
  EXPECT_EQ(python_code_point_count("abc"), 3u);
  // len("Größe 東京 😀") == 10 in Python.
  EXPECT_EQ(python_code_point_count("Gr\xC3\xB6\xC3\x9F"
                                    "e \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x98\x80"),
            10u);
}

TEST(PythonStr, IsspaceMatchesCPython) {
  for (char32_t cp :
       {U'\t', U'\n', U'\v', U'\f', U'\r', U'\x1c', U'\x1f', U' ', U'\x85', U'\xa0', U'\u1680',
        U'\u2000', U'\u200a', U'\u2028', U'\u2029', U'\u202f', U'\u205f', U'\u3000'}) {
    EXPECT_TRUE(python_isspace(cp)) << static_cast<unsigned>(cp);
  }
  for (char32_t cp :
       {U'a', U'\x08', U'\x0e', U'\x1b', U'\x21', U'\u180e', U'\u200b', U'\ufeff', U'\u2060'}) {
    EXPECT_FALSE(python_isspace(cp)) << static_cast<unsigned>(cp);
  }
}

TEST(PythonStr, StripRemovesUnicodeWhitespaceOnBothEnds) {
  EXPECT_EQ(python_strip(""), "");
  EXPECT_EQ(python_strip(" \t\n "), "");
  EXPECT_EQ(python_strip("  a b  "), "a b");
  // "\u3000\u2003 x \u00a0\n".strip() == "x"
  EXPECT_EQ(python_strip("\xE3\x80\x80\xE2\x80\x83 x \xC2\xA0\n"), "x");
  // ZERO WIDTH SPACE is not whitespace: "\u200bx\u200b".strip() keeps it.
  EXPECT_EQ(python_strip("\xE2\x80\x8Bx\xE2\x80\x8B"), "\xE2\x80\x8Bx\xE2\x80\x8B");
  // Inner whitespace and multi-byte neighbours are kept.
  EXPECT_EQ(python_strip("\xC2\xA0\xE6\x9D\xB1 \xE4\xBA\xAC\xC2\xA0"), "\xE6\x9D\xB1 \xE4\xBA\xAC");
}

}  // namespace
}  // namespace kvaudit::model
